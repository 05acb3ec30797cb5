#pragma once
// All-reduce through memory that every rank of one host maps: each rank publishes the slices
// its peers reduce, reduces its own 1/N slice straight from the peers' areas, then copies the
// other reduced slices back (about 1.5 memcpy of traffic per rank, no sockets, no extra
// threads). A late peer is awaited on a futex, so waiting costs sleep rather than a spinning
// core that backward() on a one-core rank needs. MpiCommunicator places the areas in an MPI
// shared window, GlooCommunicator in a POSIX shared-memory object (SharedMemory).
#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace nano {

class ShmAllReduce {
 public:
  /// Each area starts with this many header bytes (fence counter, owner pid).
  static constexpr int64_t kHeaderBytes = 64;
  /// Below this many bytes a message-passing all-reduce's latency wins.
  static constexpr int64_t kMinBytes = 16 << 10;
  /// Default data bytes per rank's area. 1, 2, 4 and 16 MiB all-reduced 44 MB equally fast
  /// here (2 ranks); 4 MiB keeps a rank's resident share small (a tensor larger than the area
  /// goes through in chunks).
  static constexpr std::size_t kDefaultAreaBytes = 4u << 20;

  /// Writes this process's header into `area` (kHeaderBytes + data). Every rank must do it
  /// before any rank's first all_reduce (put a barrier between).
  static void init_header(char* area);

  /// `areas[q]`: rank q's area (kHeaderBytes + `data_bytes`), as mapped in this process.
  /// `timeout`: how long one wait for a peer may last before the collective fails (the
  /// communicator's collective timeout; 0 = no bound).
  ShmAllReduce(std::vector<char*> areas, int64_t data_bytes, int rank,
               std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  /// In place: `tensor` = scale * (sum over ranks). A contiguous CPU float32, float64 or
  /// bfloat16 tensor of the same numel on every rank; every rank calls with the same
  /// sequence of tensors, from one thread. Throws nano::Error naming the peer when a peer
  /// process of this host exits while being awaited (noticed within about 0.1 s) or does not
  /// arrive within the timeout (a stopped or stuck peer).
  void all_reduce(at::Tensor& tensor, double scale);

  /// Marks this rank as gone for good (its communicator is being destroyed): a peer waiting
  /// for it in a collective fails at once with a line naming it, instead of waiting for its
  /// exit or the timeout. Ranks that finished the same collectives are not affected.
  void leave();

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(areas_.size()); }

 private:
  void fence();
  void await_peer(int q);

  std::vector<char*> areas_;
  int64_t data_bytes_ = 0;
  int rank_ = 0;
  std::chrono::milliseconds timeout_{0};
  uint32_t epoch_ = 0;
};

/// A POSIX shared-memory object mapped read-write into this process; unmapped on destruction.
class SharedMemory {
 public:
  /// Creates `name` ("/..."), sized `bytes` and zero-filled; fails if it exists. Throws
  /// nano::Error naming the object and the system's reason.
  static std::unique_ptr<SharedMemory> create(const std::string& name, std::size_t bytes);
  /// Maps the existing object `name` of at least `bytes` bytes; throws nano::Error otherwise.
  static std::unique_ptr<SharedMemory> open(const std::string& name, std::size_t bytes);
  ~SharedMemory();
  SharedMemory(const SharedMemory&) = delete;
  SharedMemory& operator=(const SharedMemory&) = delete;

  /// Removes the name (the mapping stays valid). Once every rank has mapped it, this keeps
  /// /dev/shm clean even when ranks are later killed.
  void unlink();
  char* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  SharedMemory(std::string name, char* data, std::size_t bytes) : name_(std::move(name)), data_(data), bytes_(bytes) {}
  std::string name_;
  char* data_ = nullptr;
  std::size_t bytes_ = 0;
  bool linked_ = true;
};

}  // namespace nano
