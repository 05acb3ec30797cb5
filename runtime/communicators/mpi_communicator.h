#pragma once
// Communicator over Open MPI's C API: shared memory between ranks of one host, the network
// between hosts. Every MPI call runs on one dedicated communication thread, so an
// all_reduce_async started from an autograd hook progresses while backward continues.
// When every rank shares one host, all-reduces of 16 KiB and more run through an MPI
// shared-memory window (ShmCollectives: about 1.5 memcpy of traffic per rank). Across hosts
// that each hold the same number of ranks (two or more) they are hierarchical: a reduce-scatter
// in each host's window, MPI_Allreduce of each rank's slice among the ranks of its local index
// (bfloat16 travels as bfloat16, summed in float), an all-gather in the window. Otherwise it is
// MPI_Allreduce.
#include <memory>

#include "runtime/collectives/collective_route.h"
#include "runtime/collectives/peer_communicator.h"
#include "runtime/collectives/shm_collectives.h"

namespace nano {

class MpiEngine;
struct ShmArena;

class MpiCommunicator : public PeerCommunicator {
 public:
  /// Initialises MPI once per process (MPI_Init_thread on the communication thread; it is
  /// finalised at process exit) and duplicates MPI_COMM_WORLD. Throws nano::Error when MPI's
  /// world disagrees with `context` (rank or size).
  /// `shm_segment_bytes`: per-rank shared window (0 = never use shared memory).
  explicit MpiCommunicator(const Context& context, std::size_t shm_segment_bytes = ShmCollectives::kDefaultAreaBytes);
  ~MpiCommunicator() override;

  std::string name() const override { return "mpi"; }
  void broadcast(at::Tensor& tensor, int root = 0) override;
  std::unique_ptr<Work> all_reduce_async(at::Tensor& tensor, ReduceOp op) override;
  void barrier() override;
  std::vector<double> gather(const std::vector<double>& values) override;
  /// True when all-reduces of ShmCollectives::kMinBytes and more go through the shared window
  /// (smaller ones, broadcast, barrier and gather take MPI's own, their signatures compared in
  /// the window first). False across hosts (even where the all-reduces are hierarchical), with
  /// shm_segment_bytes 0, or when the window's backing directory (Open MPI: /dev/shm) has too
  /// little free space; rank 0 then prints one line saying so and MPI_Allreduce carries them.
  bool uses_shared_memory() const override { return shm_ != nullptr && !hierarchical_; }

 private:
  std::shared_ptr<MpiEngine> engine_;
  void* comm_ = nullptr;           // MPI_Comm, kept opaque so users need no <mpi.h>
  std::shared_ptr<ShmArena> shm_;  // null when the hosts' rank counts differ
  bool hierarchical_ = false;      // the window is each host's, `shm_->across` joins the hosts
  // The all-reduces through the shared window when the ranks have one, everything else through
  // MPI after the signatures were compared (in the window, else with one small MPI_Allgather).
  CollectiveRoute route_;
};

}  // namespace nano
