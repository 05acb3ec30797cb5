#include "python/nano_work.h"

#include <mutex>
#include <set>
#include <string>

#include <nano/error.h>
#include "runtime/collectives/serial_executor.h"

namespace nano {
namespace {

// "nano:" + what, as torch's profiler names a collective ("gloo:all_reduce" for Gloo's). Its
// RecordFunction keeps a view of the name, not a copy: one lasting copy per name.
const char* profiling_title(const char* what) {
  // Never destroyed: the backend's threads may issue a collective while the process exits.
  static auto* const mutex = new std::mutex;
  static auto* const titles = new std::set<std::string>;
  std::lock_guard<std::mutex> lock(*mutex);
  return titles->insert(std::string("nano:") + what).first->c_str();
}

}  // namespace

NanoWork::NanoWork(int rank, c10d::OpType type, const char* what, std::vector<at::Tensor> outputs,
                   std::chrono::milliseconds limit)
    : c10d::Work(rank, type, profiling_title(what), outputs),
      what_(what),
      outputs_(std::move(outputs)),
      limit_(limit),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))),
      done_(std::make_shared<Completion>()) {}

void NanoWork::finish(std::exception_ptr error) {
  if (recordFunctionEndCallback_) {  // profiling: the collective's span ends here
    recordFunctionEndCallback_();
    recordFunctionEndCallback_ = nullptr;
  }
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  done_->finish(error);
}

bool NanoWork::isCompleted() { return future_->completed(); }
bool NanoWork::isSuccess() const { return future_->completed() && !future_->hasError(); }
std::exception_ptr NanoWork::exception() const { return future_->completed() ? future_->exception_ptr() : nullptr; }
std::vector<at::Tensor> NanoWork::result() { return outputs_; }
c10::intrusive_ptr<c10::ivalue::Future> NanoWork::getFuture() { return future_; }

bool NanoWork::wait(std::chrono::milliseconds timeout) {
  const std::chrono::milliseconds limit = timeout == kCallerGaveNoTimeout ? limit_ : timeout;
  if (!done_->wait_for(limit)) throw Error(collective_timeout_message(what_, limit));
  return true;
}

}  // namespace nano
