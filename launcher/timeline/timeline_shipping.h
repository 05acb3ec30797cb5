#pragma once
// The timeline's records across hosts: nano-run's records folder (launcher/timeline/timeline_merge.h) lives on
// its own host. A rank shim on another host points its rank's records at the rank's own files
// folder, and sends the records file over its link to nano-run once the rank has ended
// (FrameType::kTimeline); nano-run writes it into the folder, where the other ranks' files are.
// A folder of the same path on the other host is not relied on, even where it exists: it may be
// shared, or a stale one of an earlier job, which would take the records and keep them.
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace nano {

/// The most bytes of one records file that travel (a frame's payload is at most
/// FrameDecoder::kMaxPayload): far above the records' bound (launcher/timeline/timeline_merge.h), a few MB.
inline constexpr std::size_t kMaxShippedRecords = 15u << 20;

/// Pure: whether `name` is a rank's records file, "rank-R.attempt-A" (nothing else is written).
bool is_records_file_name(const std::string& name);

/// Pure: the kTimeline payload for records file `name` holding `bytes`: "NAME\n" then the bytes.
std::string shipped_records_payload(const std::string& name, const std::string& bytes);

/// Pure: (name, bytes) from a kTimeline payload; nullopt when the name is not a records file's.
std::optional<std::pair<std::string, std::string>> parse_shipped_records(const std::string& payload);

/// The shim's side, on another host than nano-run's: the folder its rank records into,
/// `files_dir`/timeline, made here ("" when it cannot be made: nothing is recorded then).
std::string make_shipping_folder(const std::string& files_dir);

/// The shim's side: a kTimeline payload for every records file in `folder` (the first
/// kMaxShippedRecords bytes of each).
std::vector<std::string> records_to_ship(const std::string& folder);

/// nano-run's side: a shipped payload written into the records `folder`, unless a file of its
/// name is there already or the payload is no records file's.
void keep_shipped_records(const std::string& folder, const std::string& payload);

}  // namespace nano
