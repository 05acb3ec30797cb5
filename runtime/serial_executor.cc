#include "runtime/serial_executor.h"

namespace nano {

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

CompletionWork::~CompletionWork() {
  try {
    if (!waited_) completion_->wait();
  } catch (...) {
    // The owner dropped the handle, so nobody is left to hear about the failure.
  }
}

void CompletionWork::wait() {
  waited_ = true;
  completion_->wait();
}

SerialExecutor::SerialExecutor() : thread_([this] { loop(); }) {}

SerialExecutor::~SerialExecutor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<Completion> SerialExecutor::submit(std::function<void()> task) {
  auto completion = std::make_shared<Completion>();
  std::lock_guard<std::mutex> lock(mutex_);
  queue_.emplace_back([task = std::move(task), completion] {
    try {
      task();
      completion->finish(nullptr);
    } catch (...) {
      completion->finish(std::current_exception());
    }
  });
  cv_.notify_all();
  return completion;
}

void SerialExecutor::loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

}  // namespace nano
