#pragma once
// Communicator over Debian libtorch's c10d::ProcessGroupGloo, rendezvous through the store that
// rendezvous() chooses (a file in /dev/shm for a nano-run job on one host, else a c10d::TCPStore
// that rank 0 hosts on MASTER_ADDR:MASTER_PORT). When every rank runs on one
// host, every collective (all-reduces of every size, broadcast, barrier, gather) goes through a
// POSIX shared-memory object (ShmCollectives, on a thread of its own) instead of Gloo's TCP
// loopback, whose copies and two I/O threads cost a rank bound to one core more than the
// reduction itself; its header carries each call's signature. Otherwise every call's signature
// is compared through one small Gloo all-reduce first (runtime/collectives/gloo_signatures.h),
// and across hosts that each hold the same number of ranks (two or more) the all-reduces are
// hierarchical: a reduce-scatter in each host's shared memory, a Gloo all-reduce of each rank's
// slice among the ranks of its local index (bfloat16 as bfloat16, runtime/collectives/wire_ring.h),
// an all-gather in shared memory.
#include <c10/util/intrusive_ptr.h>

#include <cstddef>
#include <memory>

#include "runtime/collectives/collective_route.h"
#include "runtime/collectives/collective_signature.h"
#include "runtime/collectives/gloo_binding.h"
#include "runtime/collectives/peer_communicator.h"
#include "runtime/collectives/shm_collectives.h"

namespace c10d {
class ProcessGroupGloo;
class Store;
}  // namespace c10d

namespace nano {

class SerialExecutor;
class SharedMemory;

class GlooCommunicator : public PeerCommunicator {
 public:
  /// Rendezvous through rank 0's store (runtime/rendezvous/rendezvous.h: its errors name the missing
  /// ranks). Every collective is bounded by context.collective_timeout.
  /// `shm_segment_bytes`: per-rank shared-memory area when context.local_world_size equals the
  /// world size (0 = always Gloo). The ranks use it only if every one of them could map it.
  explicit GlooCommunicator(const Context& context, std::size_t shm_segment_bytes = ShmCollectives::kDefaultAreaBytes);
  ~GlooCommunicator() override;

  std::string name() const override { return "gloo"; }
  void broadcast(at::Tensor& tensor, int root = 0) override;
  std::unique_ptr<Work> all_reduce_async(at::Tensor& tensor, ReduceOp op) override;
  void barrier() override;
  std::vector<double> gather(const std::vector<double>& values) override;
  /// True when every collective goes through shared memory (see the file comment).
  bool uses_shared_memory() const override { return shm_ != nullptr; }
  /// True when the world spans hosts and its all-reduces are hierarchical (see the file comment).
  bool hierarchical() const { return across_ != nullptr; }

 private:
  void connect_shared_memory(const Context& context, std::size_t segment_bytes);
  // Across hosts: each host's shared memory and the Gloo group of this local index, when every
  // host holds the same number of ranks; rank 0 says once why not where that costs speed.
  void connect_across_hosts(const Context& context, const GlooBinding& where, std::size_t segment_bytes);

  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
  // Declared in teardown order's reverse: the thread stops before the memory goes.
  std::unique_ptr<SharedMemory> shm_memory_;
  std::unique_ptr<ShmCollectives> shm_;                // the world's (one host) or this host's (hierarchical)
  c10::intrusive_ptr<c10d::ProcessGroupGloo> across_;  // this local index's ranks, one per host
  std::unique_ptr<SerialExecutor> ring_thread_;        // the bfloat16 rings (between hosts, or flat)
  std::unique_ptr<SerialExecutor> shm_thread_;
  // Shared memory when every rank has it, else Gloo after the signatures were compared.
  CollectiveRoute route_;
};

}  // namespace nano
