#pragma once
// One thread that runs submitted tasks in submission order. Communicators run their
// collectives on one, so a collective started from an autograd hook progresses while
// backward() continues, and every rank issues its collectives in the same order.
//
// Every wait on it can be bounded. A task that outlives its bound is stuck in a library call
// that will not return (a peer stopped answering): the executor is then *abandoned* — later
// submissions fail at once with the reason, and its destructor leaves the thread to the
// process's exit instead of joining it, so nothing at exit can block on it.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <nano/communicator.h>

namespace nano {

/// The outcome of one task: set once by the executor's thread, awaited by others.
class Completion {
 public:
  /// Marks the task done, with the exception it threw (or null).
  void finish(std::exception_ptr error);
  /// Blocks until finish(); rethrows the task's exception.
  void wait();
  /// Blocks at most `limit` (<= 0: no bound). False when the task has not finished by then;
  /// rethrows the task's exception when it has.
  bool wait_for(std::chrono::milliseconds limit);

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

/// "nano: all_reduce did not finish within 600 s: ..." — the one text of a collective timeout.
std::string collective_timeout_message(const std::string& what, std::chrono::milliseconds limit);

class SerialExecutor;

/// A Work handle over a Completion. wait() waits at most `limit` (0 = no bound); when that
/// runs out, `owner` is abandoned and wait() throws nano::Error (collective_timeout_message).
/// Destroying an unwaited handle waits the same way and swallows the failure.
class CompletionWork : public Work {
 public:
  CompletionWork(std::shared_ptr<Completion> completion, SerialExecutor* owner = nullptr,
                 std::chrono::milliseconds limit = std::chrono::milliseconds(0), std::string what = "all_reduce")
      : completion_(std::move(completion)), owner_(owner), limit_(limit), what_(std::move(what)) {}
  ~CompletionWork() override;
  void wait() override;

 private:
  std::shared_ptr<Completion> completion_;
  SerialExecutor* owner_;
  std::chrono::milliseconds limit_;
  std::string what_;
  bool waited_ = false;
};

class SerialExecutor {
 public:
  SerialExecutor();
  /// Runs the tasks already queued, then joins the thread — unless abandoned (see above), or
  /// called by one of its own tasks: it is abandoned then (what is queued fails, the thread
  /// ends after that task).
  ~SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  /// Queues `task`; its Completion carries the exception it throws. Throws nano::Error with
  /// the abandonment reason once the executor is abandoned.
  std::shared_ptr<Completion> submit(std::function<void()> task);
  /// Runs `task` on the executor's thread and waits for it; rethrows its exception.
  void run(std::function<void()> task) { submit(std::move(task))->wait(); }
  /// Like run(), waiting at most `limit` (0 = no bound); when that runs out, abandons the
  /// executor and throws nano::Error(collective_timeout_message(what, limit)).
  void run_for(std::function<void()> task, std::chrono::milliseconds limit, const std::string& what);
  /// From now on submissions fail with `reason`; the thread is never joined.
  void abandon(const std::string& reason);
  bool abandoned() const;
  /// True when called from one of its own tasks.
  bool on_own_thread() const;
  /// Finished once the thread has returned: after the destructor (which joins it), or, when a
  /// task of its own destroyed it, once that task returned. Outlives the executor.
  std::shared_ptr<Completion> thread_finished() const;

 private:
  struct State;
  static void loop(std::shared_ptr<State> state);

  // Shared with the thread, so a thread left running after abandonment never touches freed
  // memory when its stuck call finally returns during the process's exit.
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace nano
