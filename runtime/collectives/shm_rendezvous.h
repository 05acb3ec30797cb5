#pragma once
// Shared memory for a world whose ranks meet through a c10d::Store: rank 0 creates a POSIX
// shared-memory object and publishes its name, every rank reports whether it could map it (a
// rank in another container, or on another host with its own /dev/shm, cannot), and all use it
// only if all could. The Gloo communicator and the torch backend both meet this way.
#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/collectives/host_layout.h"
#include "runtime/collectives/shm_collectives.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace nano {

/// The areas every rank mapped, and the collectives over them; both null when the ranks
/// could not all map it (they then use their message-passing path).
struct SharedWorld {
  std::unique_ptr<SharedMemory> memory;
  std::unique_ptr<ShmCollectives> collectives;
};

/// What rank 0 publishes in the store for the others to map: the object's name ("" when it could
/// not make one) and each rank's data bytes.
struct SharedArea {
  std::string name;
  std::size_t data_bytes = 0;
};

/// Pure: the store's "NAME\nBYTES" value read back, bounded before use: a name of nano's own
/// ("/nano-..." without another '/', at most 255 bytes) or "", and a byte count that is a
/// multiple of 64 up to 1 PiB; nullopt for anything else (a value rank 0 never writes).
std::optional<SharedArea> parse_shared_area(const std::string& text);

/// Bytes of each rank's shared-memory area: NANO_SHM_BYTES (0 = never shared memory; a test
/// and tuning knob), else ShmCollectives::kDefaultAreaBytes. Throws nano::UsageError naming a
/// malformed value.
std::size_t shm_bytes_from_environment();

/// Agrees on shared memory of `segment_bytes` per rank through `store` (keys under
/// "<tag>/shm/"); call it only when every rank runs on this host. Every rank of the world must
/// call it, with the same `tag`. The object's name starts with /nano-<NANO_JOB_ID>- under
/// nano-run, so the launcher removes it should a rank die before the name is unlinked; the name
/// is unlinked as soon as every rank has mapped it or given up, so a killed job leaves nothing
/// in /dev/shm. A rank that cannot create or map it says why in one line on stderr and the world
/// goes without. `timeout` bounds each wait of the collectives. Throws what the store throws (a
/// peer that never reports).
SharedWorld join_shared_memory(c10d::Store& store, int rank, int size, std::size_t segment_bytes,
                               std::chrono::milliseconds timeout, const std::string& tag);

/// What tells two ranks they can map each other's shared memory: the host's name and the
/// /dev/shm they see (two containers of one host with their own /dev/shm cannot).
std::string host_identity();

/// A world across hosts, as the hierarchical all-reduce needs it: this rank's place, and the
/// shared memory of the ranks of its host.
struct SharedHost {
  HostLayout layout;
  SharedWorld world;  ///< this host's ranks' areas; null when the world takes the flat path
  /// Why the world takes the flat path, for the log: host_layout's reason, or "rank R could not
  /// map its host's shared memory"; "" when it does not, or where nothing is lost (see HostLayout)
  /// or the caller chose it (`segment_bytes` 0).
  std::string flat_because;
};

/// Every rank of a world whose rank r runs on `host_of_rank[r]` (host_identity()) calls it, with
/// the same `tag`: where the hosts hold the same number of ranks, two or more, each host's ranks
/// agree on their own shared memory (as join_shared_memory, under "<tag>/host-<h>/"), then every
/// rank learns whether every host's did (under "<tag>/across/"), so that all take the same path.
/// Throws what the store throws (a peer that never reports).
SharedHost join_host_memory(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<std::string>& host_of_rank,
                            int rank, std::size_t segment_bytes, std::chrono::milliseconds timeout,
                            const std::string& tag);

}  // namespace nano
