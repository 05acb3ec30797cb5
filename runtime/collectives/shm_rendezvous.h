#pragma once
// Shared memory for a world whose ranks meet through a c10d::Store: rank 0 creates a POSIX
// shared-memory object and publishes its name, every rank reports whether it could map it (a
// rank in another container, or on another host with its own /dev/shm, cannot), and all use it
// only if all could. The Gloo communicator and the torch backend both meet this way.
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

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

}  // namespace nano
