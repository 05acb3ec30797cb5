#include "runtime/collectives/shm_rendezvous.h"

#include <sys/stat.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <vector>

#include <nano/error.h>
#include "core/job_secret.h"  // make_challenge, hex_of
#include "core/parse.h"
#include "core/rank_contract.h"

namespace nano {

namespace {

std::vector<uint8_t> bytes_of(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

// Unique on this host: the job (or, outside nano-run, nothing), the creating process and its
// count of worlds. The creator is the world's rank 0, which for a subgroup is not the job's.
std::string object_name() {
  // Under the job's prefix (removed with the job's files however it ends), then 64 random bits:
  // nobody can make it first to push the job onto the slower path.
  const char* job = std::getenv(contract::kJobId);
  const std::string owner = job && *job ? std::string(job) + "-" + std::to_string(getpid()) : std::to_string(getpid());
  return "/nano-" + owner + "-" + hex_of(make_challenge()).substr(0, 16);
}

}  // namespace

// At most 1 PiB per rank, so sizes summed over the ranks of one host stay far from overflow.
constexpr long long kMaxBytes = 1LL << 50;

std::optional<SharedArea> parse_shared_area(const std::string& text) {
  const std::size_t cut = text.find('\n');
  if (cut == std::string::npos || cut > 255) return std::nullopt;
  SharedArea area;
  area.name = text.substr(0, cut);
  // "" (rank 0 could not make one), or a name of nano's own: "/nano-" and no other slash.
  if (!area.name.empty() && (area.name.rfind("/nano-", 0) != 0 || area.name.find('/', 1) != std::string::npos))
    return std::nullopt;
  const std::optional<long long> bytes = parse_integer(text.substr(cut + 1), 0, kMaxBytes);
  if (!bytes || *bytes % 64 != 0) return std::nullopt;
  area.data_bytes = static_cast<std::size_t>(*bytes);
  return area;
}

std::size_t shm_bytes_from_environment() {
  const char* text = std::getenv(contract::kShmBytes);
  if (!text) return ShmCollectives::kDefaultAreaBytes;
  const std::optional<long long> bytes = parse_integer(text, 0, kMaxBytes);
  if (!bytes || (*bytes > 0 && *bytes < 64)) {
    throw UsageError(std::string("nano: bad ") + contract::kShmBytes + "='" + text +
                     "': expected 0 or a byte count from 64 to " + std::to_string(kMaxBytes));
  }
  return static_cast<std::size_t>(*bytes);
}

SharedWorld join_shared_memory(c10d::Store& store, int rank, int size, std::size_t segment_bytes,
                               std::chrono::milliseconds timeout, const std::string& tag) {
  SharedWorld world;
  if (size < 2 || segment_bytes == 0) return world;
  const std::string prefix = tag + "/shm/";
  // Rank 0's size is everyone's (a rank with another NANO_SHM_BYTES would cut its chunks
  // elsewhere and fall out of step), rounded to a cache line so every area's header stays
  // aligned for its atomics and futex.
  std::size_t data_bytes = (segment_bytes + 63) / 64 * 64;
  std::unique_ptr<SharedMemory> memory;
  std::string name;
  if (rank == 0) {
    name = object_name();
    try {
      memory = SharedMemory::create(name, (ShmCollectives::kHeaderBytes + data_bytes) * static_cast<std::size_t>(size));
    } catch (const SharedMemoryTaken&) {
      throw;  // an attack, not a full /dev/shm: the job stops rather than run as someone arranged
    } catch (const Error& e) {
      // Said once, by the creator: the job still runs, on the slower path.
      std::cerr << e.what() << "; collectives go through TCP instead (" << contract::kShmBytes
                << "=0 chooses that quietly)" << std::endl;
      name.clear();
    }
    store.set(prefix + "name", bytes_of(name + "\n" + std::to_string(data_bytes)));
  } else {
    const auto value = store.get(prefix + "name");
    // Bounded before use: a value that is not rank 0's is refused, never mapped.
    const std::optional<SharedArea> area =
        value.size() <= 300 ? parse_shared_area(std::string(value.begin(), value.end())) : std::nullopt;
    if (!area)
      throw Error("nano: rank " + std::to_string(rank) + ": the store's shared-memory entry (" + prefix +
                  "name) is not one rank 0 writes");
    name = area->name;
    data_bytes = area->data_bytes;
    if (!name.empty()) {
      try {
        memory = SharedMemory::open(name, (ShmCollectives::kHeaderBytes + data_bytes) * static_cast<std::size_t>(size));
      } catch (const Error& e) {
        // This rank reports "not mapped" below, so every rank goes without; say why.
        std::cerr << "nano: rank " << rank << ": " << e.what() << "; collectives go through TCP instead" << std::endl;
      }
    }
  }
  const std::size_t area = ShmCollectives::kHeaderBytes + data_bytes;
  if (memory) ShmCollectives::init_header(memory->data() + area * rank);
  // Reporting also orders every header's initialisation before anyone's first collective.
  store.set(prefix + "ok/" + std::to_string(rank), std::vector<uint8_t>{uint8_t(memory ? 1 : 0)});
  bool everyone = true;
  for (int r = 0; r < size; ++r) {
    const auto ok = store.get(prefix + "ok/" + std::to_string(r));
    everyone = everyone && !ok.empty() && ok[0] == 1;
  }
  // Every rank has mapped it or given up: the name can go.
  if (memory && rank == 0) memory->unlink();
  if (!everyone) return world;
  std::vector<char*> areas;
  for (int q = 0; q < size; ++q) areas.push_back(memory->data() + area * q);
  world.collectives =
      std::make_unique<ShmCollectives>(std::move(areas), static_cast<int64_t>(data_bytes), rank, timeout);
  world.memory = std::move(memory);
  return world;
}

std::string host_identity() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  struct stat st {};
  const unsigned long long device = stat("/dev/shm", &st) == 0 ? static_cast<unsigned long long>(st.st_dev) : 0;
  return std::string(name) + "/" + std::to_string(device);
}

SharedHost join_host_memory(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<std::string>& host_of_rank,
                            int rank, std::size_t segment_bytes, std::chrono::milliseconds timeout,
                            const std::string& tag) {
  SharedHost host;
  host.layout = host_layout(host_of_rank, rank);
  host.flat_because = host.layout.flat_because;
  if (!host.layout.hierarchical || segment_bytes == 0) return host;
  c10d::PrefixStore mine(tag + "/host-" + std::to_string(host.layout.host), store);
  SharedWorld world =
      join_shared_memory(mine, host.layout.local_rank, host.layout.local_size, segment_bytes, timeout, tag);
  store->set(tag + "/across/" + std::to_string(rank), std::vector<uint8_t>{uint8_t(world.collectives ? 1 : 0)});
  for (int r = 0; r < static_cast<int>(host_of_rank.size()); ++r) {
    const auto mapped = store->get(tag + "/across/" + std::to_string(r));
    if (mapped.empty() || mapped[0] != 1) {
      host.flat_because = "rank " + std::to_string(r) + " could not map its host's shared memory";
      return host;
    }
  }
  host.world = std::move(world);
  return host;
}

}  // namespace nano
