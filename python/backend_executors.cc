#include "python/backend_executors.h"

#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "runtime/collectives/serial_executor.h"

namespace nano {

namespace {

// Every live backend's executor, for drain_torch_backends. Leaked on purpose: backends may be
// destroyed during the process's exit, after static objects are.
std::mutex& live_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::set<SerialExecutor*>& live_executors() {
  static auto* s = new std::set<SerialExecutor*>;
  return *s;
}
// The threads of backends destroyed by a task of their own (a program's last reference to its
// process group dropped in a future's callback): each ends once that task returned.
std::vector<std::shared_ptr<Completion>>& leaving_threads() {
  static auto* v = new std::vector<std::shared_ptr<Completion>>;
  return *v;
}

}  // namespace

void register_backend_executor(SerialExecutor& executor) {
  std::lock_guard<std::mutex> lock(live_mutex());
  live_executors().insert(&executor);
}

void unregister_backend_executor(SerialExecutor& executor) {
  std::lock_guard<std::mutex> lock(live_mutex());
  live_executors().erase(&executor);
  if (executor.on_own_thread()) leaving_threads().push_back(executor.thread_finished());
}

bool drain_torch_backends(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  const auto wait = [&](const std::shared_ptr<Completion>& done) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    try {
      return left.count() > 0 && done->wait_for(left);
    } catch (const std::exception&) {
      return true;  // it ended: what failed was its caller's to hear about
    }
  };
  std::vector<std::shared_ptr<Completion>> marks;
  {
    // A no-op behind everything queued: the executor runs its tasks in order and releases each
    // one's captures before the next starts, so once it ran, all before it are done with.
    std::lock_guard<std::mutex> lock(live_mutex());
    for (SerialExecutor* executor : live_executors()) {
      try {
        marks.push_back(executor->submit([] {}));
      } catch (const std::exception&) {
        // abandoned (a collective outlived its bound): it holds a thread nothing can end
      }
    }
  }
  bool drained = true;
  for (const auto& mark : marks) drained = wait(mark) && drained;
  // A backend destroyed by one of its own tasks meanwhile (its no-op then failed at once): its
  // thread is still inside that task.
  std::vector<std::shared_ptr<Completion>> leaving;
  {
    std::lock_guard<std::mutex> lock(live_mutex());
    leaving = leaving_threads();
  }
  for (const auto& thread : leaving) drained = wait(thread) && drained;
  return drained;
}

}  // namespace nano
