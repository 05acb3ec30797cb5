#pragma once
// The Work the `nano` torch backend returns for each queued operation: a future of its output
// tensors, completed on the backend's thread (where DDP's callbacks then run), and a wait
// bounded by the group's timeout.
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <ATen/core/ivalue.h>

#include <chrono>
#include <exception>
#include <memory>
#include <vector>

namespace nano {

class Completion;

/// Work::wait()'s "no timeout given" (c10d's kNoTimeout, 0 ms, which torch 1.13 declares at
/// global scope and 2.x inside c10d).
constexpr std::chrono::milliseconds kCallerGaveNoTimeout{0};

/// One queued operation's Work (see the top of this file).
class NanoWork : public c10d::Work {
 public:
  /// `what` names the operation in errors (a string literal) and, as "nano:WHAT", in torch's
  /// profiler, from its issue to its end; `limit` bounds a wait without a timeout of its caller's.
  NanoWork(int rank, c10d::OpType type, const char* what, std::vector<at::Tensor> outputs,
           std::chrono::milliseconds limit);

  /// Called once, on the backend's thread: the future's callbacks run, then waiters wake.
  void finish(std::exception_ptr error);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  /// `timeout` from the caller (Work.wait(timeout)); none given means the group's (a little
  /// more: the collective itself fails first at the group's timeout, naming the peer it awaited).
  bool wait(std::chrono::milliseconds timeout) override;

 private:
  const char* what_;
  std::vector<at::Tensor> outputs_;
  std::chrono::milliseconds limit_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<Completion> done_;
};

}  // namespace nano
