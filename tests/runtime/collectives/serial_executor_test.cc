// The serial executor's ends: in order, a bounded wait that abandons it, and its destruction by
// one of its own tasks (a stock PyTorch program can drop its process group's last reference in
// a future's callback, on the nano backend's thread).
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nano/error.h>
#include "runtime/collectives/serial_executor.h"

// torch's logging defines CHECK too; the tests' is doctest's.
#undef CHECK
#include <doctest/doctest.h>

using namespace std::chrono_literals;

TEST_CASE("the executor runs tasks in order and carries their exceptions") {
  nano::SerialExecutor executor;
  std::vector<int> order;
  auto first = executor.submit([&] { order.push_back(1); });
  auto failing = executor.submit([&] {
    order.push_back(2);
    throw nano::Error("boom");
  });
  executor.run([&] { order.push_back(3); });
  CHECK(order == std::vector<int>{1, 2, 3});
  CHECK(first->wait_for(1s));
  CHECK_THROWS_WITH_AS(failing->wait_for(1s), "boom", nano::Error);
}

TEST_CASE("a task that destroys its own executor: no self-join, what is queued behind it fails") {
  auto executor = std::make_shared<nano::SerialExecutor>();
  const std::shared_ptr<nano::Completion> thread_finished = executor->thread_finished();
  std::atomic<bool> later_ran{false};
  std::shared_ptr<nano::Completion> later;
  auto release = std::make_shared<nano::Completion>();
  auto first = executor->submit([&] {
    release->wait();   // until `later` is queued behind this task
    executor.reset();  // the last reference: ~SerialExecutor on its own thread
  });
  later = executor->submit([&] { later_ran = true; });
  release->finish(nullptr);
  CHECK(first->wait_for(5s));
  CHECK_THROWS_WITH_AS(later->wait_for(5s), "nano: the executor was destroyed by one of its own tasks", nano::Error);
  CHECK_FALSE(later_ran);
  CHECK(thread_finished->wait_for(5s));  // the thread ended after that task, on its own
}

TEST_CASE("an executor's thread is finished once it is destroyed") {
  auto executor = std::make_unique<nano::SerialExecutor>();
  const std::shared_ptr<nano::Completion> thread_finished = executor->thread_finished();
  executor->run([] {});
  CHECK_FALSE(thread_finished->wait_for(10ms));
  executor.reset();
  CHECK(thread_finished->wait_for(1s));
}
