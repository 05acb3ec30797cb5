#pragma once
// One thread that runs submitted tasks in submission order. Communicators run their
// collectives on one, so a collective started from an autograd hook progresses while
// backward() continues, and every rank issues its collectives in the same order.
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime/communicator.h"

namespace nano {

/// The outcome of one task: set once by the executor's thread, awaited by others.
class Completion {
 public:
  /// Marks the task done, with the exception it threw (or null).
  void finish(std::exception_ptr error);
  /// Blocks until finish(); rethrows the task's exception.
  void wait();

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

/// A Work handle over a Completion: wait() rethrows the task's exception; destroying an
/// unwaited handle waits and swallows it.
class CompletionWork : public Work {
 public:
  explicit CompletionWork(std::shared_ptr<Completion> completion) : completion_(std::move(completion)) {}
  ~CompletionWork() override;
  void wait() override;

 private:
  std::shared_ptr<Completion> completion_;
  bool waited_ = false;
};

class SerialExecutor {
 public:
  SerialExecutor();
  /// Runs the tasks already queued, then joins the thread.
  ~SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  /// Queues `task`; its Completion carries the exception it throws.
  std::shared_ptr<Completion> submit(std::function<void()> task);
  /// Runs `task` on the executor's thread and waits for it; rethrows its exception.
  void run(std::function<void()> task) { submit(std::move(task))->wait(); }

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the members above exist
};

}  // namespace nano
