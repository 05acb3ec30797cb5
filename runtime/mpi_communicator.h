#pragma once
// Communicator over Open MPI's C API: shared memory between ranks of one host, the network
// between hosts. Every MPI call runs on one dedicated communication thread, so an
// all_reduce_async started from an autograd hook progresses while backward continues.
#include <memory>

#include "runtime/communicator.h"

namespace nano {

class MpiEngine;

class MpiCommunicator : public Communicator {
 public:
  /// Initialises MPI once per process (MPI_Init_thread on the communication thread; it is
  /// finalised at process exit) and duplicates MPI_COMM_WORLD. Throws nano::Error when MPI's
  /// world disagrees with `context` (rank or size).
  explicit MpiCommunicator(const Context& context);
  ~MpiCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "mpi"; }
  void broadcast(at::Tensor& tensor, int root = 0) override;
  std::unique_ptr<Work> all_reduce_async(at::Tensor& tensor, ReduceOp op) override;
  void barrier() override;
  std::vector<double> gather(const std::vector<double>& values) override;

 private:
  std::shared_ptr<MpiEngine> engine_;
  void* comm_ = nullptr;  // MPI_Comm, kept opaque so users need no <mpi.h>
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace nano
