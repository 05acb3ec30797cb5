#pragma once
// Collectives through memory that every rank of one host maps. All-reduce: each rank publishes
// the slices its peers reduce, reduces its own 1/N slice straight from the peers' areas, then
// copies the other reduced slices back (about 1.5 memcpy of traffic per rank, no sockets, no
// extra threads). Broadcast, all-gather and barrier use the same areas and fences. A late peer
// is awaited on a futex, so waiting costs sleep rather than a spinning core that backward() on
// a one-core rank needs. MpiCommunicator places the areas in an MPI shared window,
// GlooCommunicator and the torch backend in a POSIX shared-memory object (SharedMemory).
// Every collective first publishes its signature (runtime/collectives/collective_signature.h) and compares
// its peers' at its first fence, before any rank reads another's data: calls that do not match
// fail on every rank with one message naming both, and the group is broken from then on.
#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nano/error.h>
#include "core/rank_contract.h"
#include "runtime/collectives/collective_signature.h"

namespace nano {

class ShmCollectives {
 public:
  /// Each area starts with this many header bytes (fence counter, owner pid, the last calls'
  /// signatures).
  static constexpr int64_t kHeaderBytes = 128;
  /// Below this many bytes MPI's own all-reduce (its shared-memory transport) is faster than
  /// three fences: the MPI communicator sends smaller ones through MPI. Gloo's goes over TCP
  /// even on one host (0.24 ms for 4 KB against 0.01 ms for MPI's), so the Gloo communicator
  /// sends every size through shared memory.
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
  ShmCollectives(std::vector<char*> areas, int64_t data_bytes, int rank,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(0));

  /// True for the dtypes all_reduce combines: float32, float64, bfloat16, float16, int8,
  /// uint8, int16, int32, int64.
  static bool reducible(at::ScalarType type);

  /// In place: `tensor` = op over ranks, then divided by `average_over` (floating types:
  /// multiplied by 1/average_over; integers: divided, truncating; 1 = no division; only with
  /// kSum). bfloat16 and float16 are accumulated in float and rounded once. A contiguous CPU
  /// tensor of a reducible() dtype, from one thread. The sum adds the ranks' values in rank
  /// order, so every rank gets the same bits and a run repeats exactly. Throws nano::Error
  /// (and every later collective throws it again at once) when the ranks' calls do not match
  /// (another kind, dtype, count, op or root: the message names both calls, before any data
  /// moved), when a peer process of this host exits while being awaited (noticed within about
  /// 0.1 s; the message says after which of its collectives), or when a peer does not arrive
  /// within the timeout (a stopped or stuck peer).
  void all_reduce(at::Tensor& tensor, ShmReduceOp op = ShmReduceOp::kSum, int average_over = 1);

  /// The elements [first, first + count) of a `count`-element tensor that rank `rank` of `n`
  /// owns in all_reduce_across: contiguous, in rank order, sizes differing by at most one.
  static std::pair<int64_t, int64_t> own_slice(int64_t count, int n, int rank);

  /// Starts the all-reduce of one slice between hosts (below) and returns what waits for its end
  /// (empty when it has ended already).
  using StartAcross = std::function<std::function<void()>(at::Tensor& slice)>;
  /// all_reduce_across works in blocks of the tensor, so that one block's exchange between hosts
  /// runs while the next is reduce-scattered and the one before gathered: a quarter of the
  /// tensor, at least kMinAcrossBlockBytes and at most kAcrossBlockBytes. Returns elements.
  static int64_t across_block(int64_t count, int64_t element_bytes);
  static constexpr int64_t kAcrossBlockBytes = 8 << 20;
  static constexpr int64_t kMinAcrossBlockBytes = 1 << 20;

  /// The same result as all_reduce over every rank of every host, for a world whose hosts hold
  /// this group's size of ranks each. Block by block: this host's ranks reduce-scatter the block
  /// through shared memory (each rank's own_slice of it ends up holding its host's reduction),
  /// `across(slice)` starts the all-reduce of that slice in place with the ranks of the same local
  /// index on the other hosts (the same op; it must leave the same bits on every one of them), and
  /// once it ended the slice is averaged over `average_over` and the ranks all-gather the block's
  /// slices. Only this host's calls are compared here; comparing the hosts' is the caller's. Errors
  /// as all_reduce, and what `across` or its wait throws.
  void all_reduce_across(at::Tensor& tensor, ShmReduceOp op, int average_over, const StartAcross& across);

  /// In place: every rank's `tensor` (contiguous CPU, any dtype, the same bytes on every rank)
  /// gets `root`'s bytes. Errors as all_reduce.
  void broadcast(at::Tensor& tensor, int root);

  /// `outputs[q]` = rank q's `input` for every q (contiguous CPU tensors of the input's bytes;
  /// the same size on every rank). Errors as all_reduce.
  void all_gather(const at::Tensor& input, std::vector<at::Tensor>& outputs);

  /// Returns when every rank has called barrier(). Errors as all_reduce.
  void barrier();

  /// For a collective whose data goes through a peer library (Gloo, MPI) beside this group:
  /// compares every rank's `call` (its seq is set here) with one fence and no data, so one
  /// sequence numbers every call of the group and a mismatch fails as in all_reduce. Returns
  /// when every rank has made the same call.
  void agree_on(const CollectiveSignature& call);

  /// Marks this rank as gone for good (its communicator is being destroyed): a peer waiting
  /// for it in a collective fails at once with a line naming it, instead of waiting for its
  /// exit or the timeout. Ranks that finished the same collectives are not affected.
  void leave();

  /// What the timeout message names as the setting of the bound (default
  /// "NANO_COLLECTIVE_TIMEOUT"; the torch backend's is the process group's timeout).
  void set_bound_name(std::string name) { bound_name_ = std::move(name); }

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(areas_.size()); }

 private:
  void fence();
  void await_peer(int q);
  // Every collective: `open_call` numbers and publishes this rank's signature (throws the cause
  // when the group is broken), `agree` compares every rank's after the first fence, and
  // `run_call` breaks the group on any error, since the ranks' fences are out of step after it.
  void open_call(CollectiveSignature call);
  // An all-reduce's signature; throws nano::Error naming a dtype it cannot reduce.
  static CollectiveSignature all_reduce_call(const at::Tensor& tensor, ShmReduceOp op, int average_over);
  void all_reduce_chunks(at::Tensor& tensor, ShmReduceOp op, int average_over);
  void reduce_scatter_rounds(at::Tensor& tensor, ShmReduceOp op, bool first);
  void all_gather_rounds(at::Tensor& tensor);
  void agree();
  template <class Body>
  void run_call(const CollectiveSignature& call, Body body);
  std::string waiting_for(int q) const;

  std::vector<char*> areas_;
  int64_t data_bytes_ = 0;
  int rank_ = 0;
  std::chrono::milliseconds timeout_{0};
  uint32_t epoch_ = 0;
  uint64_t seq_ = 0;
  CollectiveSignature current_;
  std::string broken_;  // why the group is broken ("" = it is not)
  std::string bound_name_ = contract::kCollectiveTimeout;
};

/// The name a shared-memory object was to be made under exists already: someone else made it
/// first (the job's names are unpredictable), never used and never a reason to go on without it.
class SharedMemoryTaken : public Error {
 public:
  using Error::Error;
};

/// A POSIX shared-memory object mapped read-write into this process; unmapped on destruction.
class SharedMemory {
 public:
  /// Creates `name` ("/..."), sized `bytes` and zero-filled. Throws SharedMemoryTaken when the
  /// name exists, nano::Error naming the object and the system's reason when it cannot be made.
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
