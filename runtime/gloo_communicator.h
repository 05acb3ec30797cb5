#pragma once
// Communicator over Debian libtorch's c10d::ProcessGroupGloo, rendezvous through a
// c10d::TCPStore that rank 0 hosts on MASTER_ADDR:MASTER_PORT.
#include <c10/util/intrusive_ptr.h>

#include <memory>

#include "runtime/communicator.h"

namespace c10d {
class ProcessGroupGloo;
class TCPStore;
}  // namespace c10d

namespace nano {

class GlooCommunicator : public Communicator {
 public:
  /// Rendezvous: rank 0 hosts the store, every rank sets "nano/rank/<r>" and waits for all
  /// others. After context.rendezvous_timeout, throws nano::Error naming the address and the
  /// missing ranks, e.g. "nano: rendezvous at 127.0.0.1:29500 timed out after 2 s: 1 of 2
  /// ranks did not join (missing: 1)"; a rank > 0 that cannot reach the store says "...: the store
  /// host (rank 0) did not answer".
  explicit GlooCommunicator(const Context& context);
  ~GlooCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "gloo"; }
  void broadcast(at::Tensor& tensor, int root = 0) override;
  std::unique_ptr<Work> all_reduce_async(at::Tensor& tensor, ReduceOp op) override;
  void barrier() override;
  std::vector<double> gather(const std::vector<double>& values) override;

 private:
  int rank_ = 0;
  int size_ = 1;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group_;
};

/// Pure: the rendezvous-timeout message for `missing` ranks out of `world_size`.
std::string rendezvous_timeout_message(const std::string& address, int port, double seconds,
                                       const std::vector<int>& missing, int world_size);

}  // namespace nano
