#pragma once
// The timeline's records across hosts that share no folder: nano-run's records folder
// (launcher/timeline.h) lives on its own host. A rank shim whose host does not see it points its
// rank's records at the rank's own files folder instead, and sends the records file over its link
// to nano-run once the rank has ended (FrameType::kTimeline); nano-run writes it into the
// folder, where the other ranks' files are. Where the hosts share the folder (a cluster's
// shared work folder, the namespace test bed's /run), nothing travels.
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nano {

/// The most bytes of one records file that travel (a frame's payload is at most
/// FrameDecoder::kMaxPayload): far above the records' bound (launcher/timeline.h), a few MB.
inline constexpr std::size_t kMaxShippedRecords = 15u << 20;

/// Pure: whether `name` is a rank's records file, "rank-R.attempt-A" (nothing else is written).
bool is_records_file_name(const std::string& name);

/// Pure: the kTimeline payload for records file `name` holding `bytes`: "NAME\n" then the bytes.
std::string shipped_records_payload(const std::string& name, const std::string& bytes);

/// Pure: (name, bytes) from a kTimeline payload; nullopt when the name is not a records file's.
std::optional<std::pair<std::string, std::string>> parse_shipped_records(const std::string& payload);

/// The shim's side: the rank's records go to `records_folder` (NANO_TIMELINE) when this host sees
/// it; otherwise to `files_dir`/timeline, made here, which the returned path names ("" when the
/// records stay where nano-run reads them).
std::string local_records_folder(const std::string& records_folder, const std::string& files_dir);

/// The shim's side: a kTimeline payload for every records file in `folder` (the first
/// kMaxShippedRecords bytes of each).
std::vector<std::string> records_to_ship(const std::string& folder);

/// nano-run's side: a shipped payload written into the records `folder`, unless a file of its
/// name is there (written by the rank itself through a shared folder) or the payload is no
/// records file's.
void keep_shipped_records(const std::string& folder, const std::string& payload);

}  // namespace nano
