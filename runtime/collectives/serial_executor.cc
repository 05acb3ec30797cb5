#include "runtime/collectives/serial_executor.h"

#include <sstream>
#include <utility>

#include <nano/error.h>
#include "core/rank_contract.h"

namespace nano {

struct SerialExecutor::State {
  mutable std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::pair<std::function<void()>, std::shared_ptr<Completion>>> queue;
  bool stopping = false;
  std::string abandoned;                                                  // non-empty: why
  std::shared_ptr<Completion> finished = std::make_shared<Completion>();  // the thread returned
};

void Completion::finish(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = true;
  error_ = std::move(error);
  cv_.notify_all();
}

void Completion::wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool Completion::wait_for(std::chrono::milliseconds limit) {
  if (limit.count() <= 0) {
    wait();
    return true;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_for(lock, limit, [&] { return done_; })) return false;
  if (error_) std::rethrow_exception(error_);
  return true;
}

std::string collective_timeout_message(const std::string& what, std::chrono::milliseconds limit) {
  std::ostringstream seconds;
  seconds << limit.count() / 1000.0;
  return "nano: " + what + " did not finish within " + seconds.str() + " s: a peer rank stopped making progress (" +
         contract::kCollectiveTimeout + " sets this bound)";
}

CompletionWork::~CompletionWork() {
  try {
    if (!waited_) wait();
  } catch (...) {
    // The owner dropped the handle, so nobody is left to hear about the failure.
  }
}

void CompletionWork::wait() {
  waited_ = true;
  if (completion_->wait_for(limit_)) return;
  const std::string message = collective_timeout_message(what_, limit_);
  if (owner_) owner_->abandon(message);
  throw Error(message);
}

SerialExecutor::SerialExecutor() : state_(std::make_shared<State>()), thread_(loop, state_) {}

SerialExecutor::~SerialExecutor() {
  if (on_own_thread()) {
    // Destroyed by one of its own tasks (its owner's last reference went there, as a stock
    // PyTorch program's process group can in a future's callback): a thread cannot join
    // itself. It ends after this task, and what is queued behind it never runs: it would reach
    // the owner being destroyed.
    abandon("nano: the executor was destroyed by one of its own tasks");
  }
  bool join = true;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->stopping = true;
    join = state_->abandoned.empty();
    state_->cv.notify_all();
  }
  if (join)
    thread_.join();
  else
    thread_.detach();
}

std::shared_ptr<Completion> SerialExecutor::submit(std::function<void()> task) {
  auto completion = std::make_shared<Completion>();
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->abandoned.empty()) throw Error(state_->abandoned);
  state_->queue.emplace_back(std::move(task), completion);
  state_->cv.notify_all();
  return completion;
}

void SerialExecutor::run_for(std::function<void()> task, std::chrono::milliseconds limit, const std::string& what) {
  if (submit(std::move(task))->wait_for(limit)) return;
  const std::string message = collective_timeout_message(what, limit);
  abandon(message);
  throw Error(message);
}

void SerialExecutor::abandon(const std::string& reason) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->abandoned.empty()) state_->abandoned = reason.empty() ? "nano: communicator abandoned" : reason;
  // Nothing queued behind a stuck task will ever run: its waiters learn why now.
  for (auto& queued : state_->queue) queued.second->finish(std::make_exception_ptr(Error(state_->abandoned)));
  state_->queue.clear();
}

bool SerialExecutor::on_own_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

std::shared_ptr<Completion> SerialExecutor::thread_finished() const { return state_->finished; }

bool SerialExecutor::abandoned() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return !state_->abandoned.empty();
}

void SerialExecutor::loop(std::shared_ptr<State> state) {
  for (;;) {
    std::function<void()> task;
    std::shared_ptr<Completion> completion;
    {
      std::unique_lock<std::mutex> lock(state->mutex);
      state->cv.wait(lock, [&] { return state->stopping || !state->queue.empty(); });
      if (state->queue.empty()) {
        state->finished->finish(nullptr);
        return;
      }
      task = std::move(state->queue.front().first);
      completion = std::move(state->queue.front().second);
      state->queue.pop_front();
    }
    // What the task captured (tensors among them) is released here, before its waiter wakes:
    // a tensor whose last reference a Python caller dropped must not be freed on this thread
    // once the interpreter may be finalizing.
    std::exception_ptr error;
    try {
      task();
    } catch (...) {
      error = std::current_exception();
    }
    task = nullptr;
    completion->finish(error);
  }
}

}  // namespace nano
