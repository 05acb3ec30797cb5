#pragma once
// One interface for the collectives nano needs; implementations: MpiCommunicator (Open MPI),
// GlooCommunicator (c10d::ProcessGroupGloo over c10d::TCPStore), SelfCommunicator (world of 1).
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include <nano/context.h>

namespace nano {

enum class ReduceOp { kSum, kAverage };

/// Handle of an asynchronous collective. wait() blocks until the tensor holds the result
/// (throws nano::Error if the collective failed). Destroying an unwaited handle waits.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
};

/// Collectives over all ranks of one world. Every rank must call the same collectives in the
/// same order. Tensors: contiguous CPU tensors of float32, float64 or bfloat16 (broadcast
/// accepts any dtype); anything else throws nano::Error naming the dtype. Not thread-safe:
/// call from one thread (DDP's hooks run on the thread that calls backward()).
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// "mpi", "gloo" or "self".
  virtual std::string name() const = 0;

  /// Copies `root`'s tensor into every rank's tensor (same shape and dtype on every rank).
  virtual void broadcast(at::Tensor& tensor, int root = 0) = 0;
  /// Starts an in-place all-reduce; the tensor must stay alive until wait() returns.
  virtual std::unique_ptr<Work> all_reduce_async(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum) = 0;
  /// In-place all-reduce, blocking.
  void all_reduce(at::Tensor& tensor, ReduceOp op = ReduceOp::kSum) { all_reduce_async(tensor, op)->wait(); }
  /// Returns when every rank has entered the barrier.
  virtual void barrier() = 0;
  /// Gathers `values` (the same count on every rank) to rank 0: there the result holds
  /// size()*values.size() numbers, rank-major; on other ranks it is empty.
  virtual std::vector<double> gather(const std::vector<double>& values) = 0;
};

/// Checks that `tensor` is a contiguous CPU tensor of float32/float64/bfloat16; throws
/// nano::Error("nano: all_reduce: unsupported tensor (...)") otherwise.
void check_reducible(const at::Tensor& tensor, const char* what);

/// Checks broadcast's arguments: a contiguous CPU tensor and 0 <= root < world_size; throws
/// nano::Error naming the bad value otherwise.
void check_broadcastable(const at::Tensor& tensor, int root, int world_size);

/// Connects the communicator that `context.backend` names (rendezvous included).
std::shared_ptr<Communicator> make_communicator(const Context& context);

/// The trivial communicator of a world of one: every collective is the identity.
class SelfCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "self"; }
  void broadcast(at::Tensor& tensor, int root = 0) override;
  std::unique_ptr<Work> all_reduce_async(at::Tensor& tensor, ReduceOp op) override;
  void barrier() override {}
  std::vector<double> gather(const std::vector<double>& values) override { return values; }
};

}  // namespace nano
