#pragma once
// The `nano` backend of torch.distributed: stock PyTorch programs (DistributedDataParallel,
// dist.all_reduce, the object collectives) reach nano's collectives through the interface
// torch documents for third-party backends. python/ registers it with
// torch.distributed.Backend.register_backend.
//
// When every rank of the group runs on one host, all_reduce (SUM, AVG, PRODUCT, MIN, MAX on
// the float and integer dtypes), broadcast, all_gather and barrier go through shared memory
// (ShmCollectives). Across hosts that each hold the same number of ranks, those all_reduces are
// hierarchical: a shared-memory reduce-scatter inside each host, an all-reduce of each rank's
// slice with the ranks of its local index on the other hosts (one Gloo group per local index,
// so every rank's connection carries traffic at once), a shared-memory all-gather; bfloat16 and
// float16 travel as they are (wire_ring.h). Every other operation, and every operation of a group
// that spans hosts otherwise, goes through a c10d::ProcessGroupGloo built from the same store, so nothing
// fails for being unsupported where Gloo supports it; reduce, reduce_scatter and the coalesced
// forms are composed from the fast collectives, so they are fast and complete on every dtype.
//
// Every operation returns at once and runs on one thread of the backend's, in the order the
// operations were issued (the same order on every rank), so DDP's overlap of backward and
// communication holds. A Work's future carries the output tensors (DDP's communication hooks).
// Its callbacks run on that thread, right after the operation, and a collective a callback
// issues (PowerSGD all-reduces inside its callbacks and waits there) runs there and then: at the
// same point of every rank's sequence, so the ranks agree on the order without a lock step.
// Every wait is bounded by the group's timeout: a peer that dies inside a collective fails the
// others within about 0.1 s, one that is stopped within the timeout, each with a line naming it.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/collectives/collective_route.h"
#include "runtime/collectives/collective_signature.h"
#include "runtime/collectives/gloo_binding.h"
#include "runtime/collectives/wire_ring.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace nano {

class SerialExecutor;
class SharedMemory;
class ShmCollectives;

// torch 2.x splits a process group into a ProcessGroup front and per-device Backends, and
// register_backend's creator must return a c10d::Backend. torch 1.13's creator returns the
// process group itself, a c10d::ProcessGroup (its Backend class exists but Python does not use
// it). Either is what ProcessGroupGloo derives from (wire_ring.h).
using TorchBackendBase = C10dGroup;

/// Makes one of the backend's Gloo groups (its inner group; across hosts, one per local index) of
/// `size` ranks on `store`, listening where `where` says, each of its operations bounded by
/// `timeout`. Supplied by whoever builds the backend:
/// nano_torch makes it through torch's own Python binding of ProcessGroupGloo
/// (python/module.cc), because torch's C++ header for it needs Gloo's headers, which
/// torch's pip wheels do not ship; so the backend builds against any torch.
using GlooGroupFactory =
    std::function<c10::intrusive_ptr<TorchBackendBase>(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                                       std::chrono::milliseconds timeout, const GlooBinding& where)>;

class TorchBackend final : public TorchBackendBase {
 public:
  /// How the group's ranks meet and how long any wait may last.
  struct Options {
    int rank = 0;
    int size = 1;
    std::chrono::milliseconds timeout{std::chrono::minutes(30)};
    /// Per-rank shared-memory area in bytes (NANO_SHM_BYTES; 0 = never shared memory).
    std::size_t shm_bytes = 0;
    /// The rendezvous host (MASTER_ADDR): which address the Gloo group binds across hosts.
    std::string master_addr;
    /// Makes the inner Gloo group (required).
    GlooGroupFactory make_gloo_group;
    /// What is left of `timeout` for the ranks to join: init_process_group may have spent
    /// the rest in torch's own rendezvous (its TCPStore waits for the ranks first). Negative:
    /// all of `timeout`.
    std::chrono::milliseconds join_within{-1};
  };

  /// Joins the group through `store` (the PrefixStore torch gives each group): every rank
  /// announces its host, the ranks agree on shared memory when they share one, and the inner
  /// Gloo group connects. Throws nano::Error naming the ranks that did not join within
  /// options.timeout (counted from options.join_within when set).
  TorchBackend(const c10::intrusive_ptr<c10d::Store>& store, const Options& options);
  ~TorchBackend() override;

  const std::string getBackendName() const override { return "nano"; }
  /// True when the fast collectives go through shared memory (every rank on this host).
  bool uses_shared_memory() const { return shm_ != nullptr; }
  /// True when the group spans hosts and its all-reduces are hierarchical: shared memory inside
  /// each host, one exchange per local rank between hosts.
  bool hierarchical() const { return host_shm_ != nullptr; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = c10d::GatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks = false) override;
  /// Sequence numbers: they start at 0, as Gloo's do, and count the collectives issued to this
  /// group, the same on every rank while the ranks are in step. Unlike Gloo's they leave out
  /// send and recv, which differ between ranks by design. torch asks for them when it wraps a
  /// group to check its collectives (TORCH_DISTRIBUTED_DEBUG=DETAIL).
  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
#if TORCH_VERSION_MAJOR >= 2
  // torch 2.x's coalescing manager (all_gather_into_tensor / reduce_scatter_tensor inside
  // dist._coalescing_manager) asks for these; 1.13 has neither.
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;
#endif

 private:
  // Queues `body` on the backend's thread; the Work's future carries `outputs` once it ran.
  // Arguments are checked before (by the caller, on its own thread): what fails inside `body`
  // is a failure of the group's communication and breaks the group.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* what, std::vector<at::Tensor> outputs,
                                         std::function<void()> body);
  std::string broken() const;
  // Run on the backend's thread: the fast collective where there is one, Gloo's otherwise.
  void all_reduce_now(at::Tensor& tensor, c10d::ReduceOp::RedOpType op);
  void broadcast_now(at::Tensor& tensor, int root);
  void broadcast_across(at::Tensor& t, int root);  // hierarchical(): between hosts, then within
  void all_gather_now(const at::Tensor& input, std::vector<at::Tensor>& outputs);
  // hierarchical(): between hosts (each local index its own Gloo group), then within each host.
  void all_gather_across(const at::Tensor& input, std::vector<at::Tensor>& outputs);
  void barrier_now();
  void all_gather_into_now(const at::Tensor& input, at::Tensor& output);
  void reduce_keep_slice(at::Tensor joined, c10d::ReduceOp::RedOpType op, int64_t offset, at::Tensor& output);
  // Gloo's forms, with what Debian's Gloo lacks made up for (AVG, bfloat16, any dtype for
  // the operations that only move bytes).
  // On `group`: the backend's Gloo group, or its group across hosts. 16-bit floats are summed
  // with ring_sum_16bit, so that they travel as they are. start_: returns what waits for the end.
  void gloo_all_reduce(TorchBackendBase& group, at::Tensor& tensor, c10d::ReduceOp::RedOpType op);
  std::function<void()> start_gloo_all_reduce(TorchBackendBase& group, at::Tensor& tensor,
                                              c10d::ReduceOp::RedOpType op);
  // Across hosts, where every host holds the same number of ranks: the host's shared memory and
  // a Gloo group per local index (hierarchical()); `why_not` gets the reason when not.
  void join_across_hosts(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<std::string>& host_of_rank,
                         const Options& options, const GlooBinding& where, std::string* why_not);
  // A sparse tensor's all-reduce: Gloo's (no shared area holds a sparse layout), queued in order
  // and checked against the peers' calls like the others.
  c10::intrusive_ptr<c10d::Work> sparse_allreduce(const at::Tensor& tensor, const c10d::AllreduceOptions& opts);
  // Waits for a Gloo operation (bounded by Gloo's timeout, the group's); its failure names `what`.
  void gloo_wait(const c10::intrusive_ptr<c10d::Work>& work, const char* what);
  // Throws nano::Error naming `what` unless `root` is a rank of the group.
  void check_root(int root, const char* what) const;
  // Throws nano::Error naming `what` unless `output` holds getSize() of `input` (all-gather into
  // one tensor) / `input` holds getSize() of `output` and `op` reduces its dtype (reduce-scatter).
  void check_gathered(const at::Tensor& output, const at::Tensor& input, const char* what) const;
  void check_scattered(const at::Tensor& output, const at::Tensor& input, c10d::ReduceOp::RedOpType op,
                       const char* what) const;

  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<TorchBackendBase> gloo_;  // c10d's ProcessGroupGloo
  std::unique_ptr<SharedMemory> shm_memory_;
  std::unique_ptr<ShmCollectives> shm_;
  // Across hosts (hierarchical()): this host's ranks' shared memory, and the Gloo group of the
  // ranks of this local index, one per host.
  std::unique_ptr<SharedMemory> host_memory_;
  std::unique_ptr<ShmCollectives> host_shm_;
  c10::intrusive_ptr<TorchBackendBase> across_;
  std::unique_ptr<SerialExecutor> across_thread_;  // runs the 16-bit rings between hosts
  std::vector<int> host_of_;                       // every rank's host
  // Shared memory when every rank maps it, else Gloo after the signatures were compared.
  CollectiveRoute route_;
  std::atomic<uint64_t> issued_{0};  // collectives issued (enqueue): the sequence number
  // The first failure: the ranks' collectives are out of step after it, so every later
  // operation (queued or new) fails at once with it instead of waiting on peers that moved on.
  mutable std::mutex broken_mutex_;
  std::string broken_;
  // Declared last, destroyed first (and explicitly, in the destructor): it uses all of the above.
  std::unique_ptr<SerialExecutor> thread_;
};

// drain_torch_backends(): python/backend_executors.h.

/// The backend's options from the creator's arguments and the environment: NANO_SHM_BYTES
/// (default ShmCollectives::kDefaultAreaBytes) and MASTER_ADDR. Throws nano::UsageError naming a
/// malformed NANO_SHM_BYTES.
TorchBackend::Options torch_backend_options(int rank, int size, std::chrono::milliseconds timeout);

}  // namespace nano
