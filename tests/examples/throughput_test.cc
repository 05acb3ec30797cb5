#include "examples/common/throughput.h"

#include <doctest/doctest.h>

#include <thread>

#include <nano/error.h>

using namespace nano::examples;

TEST_CASE("warmup_steps_for: 3, or half of a short run") {
  CHECK(warmup_steps_for(0) == 0);
  CHECK(warmup_steps_for(1) == 0);
  CHECK(warmup_steps_for(3) == 1);
  CHECK(warmup_steps_for(6) == 3);
  CHECK(warmup_steps_for(938) == 3);
}

TEST_CASE("StepTimer counts only the steps after the warm-up, and no time between epochs") {
  StepTimer t(2);
  t.epoch_begin();
  t.step_end(64);
  t.step_end(64);  // warm-up over: the clock starts here
  t.step_end(64);
  t.step_end(32);
  t.epoch_end();
  CHECK(t.steps() == 2);
  CHECK(t.images() == 96);
  const double first = t.seconds();
  CHECK(first >= 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // "evaluation": not counted
  t.epoch_begin();
  t.step_end(64);
  t.epoch_end();
  CHECK(t.steps() == 3);
  CHECK(t.images() == 160);
  CHECK(t.seconds() - first < 0.04);
  // One duration per timed step, none for the warm-up or the pause between epochs.
  REQUIRE(t.step_milliseconds().size() == 3);
  double sum_ms = 0;
  for (double ms : t.step_milliseconds()) {
    CHECK(ms >= 0);
    CHECK(ms < 40);
    sum_ms += ms;
  }
  CHECK(sum_ms <= t.seconds() * 1000 + 1e-6);

  StepTimer none(0);
  none.epoch_begin();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  none.step_end(8);
  none.epoch_end();
  CHECK(none.images() == 8);
  CHECK(none.seconds() >= 0.019);
  REQUIRE(none.step_milliseconds().size() == 1);
  CHECK(none.step_milliseconds()[0] >= 19.0);
}

TEST_CASE("global_images_per_sec: all images over the slowest rank's time") {
  CHECK(global_images_per_sec({1000, 2.0, 1000, 2.5}) == doctest::Approx(800.0));
  CHECK(global_images_per_sec({640, 1.0}) == doctest::Approx(640.0));
  CHECK(global_images_per_sec({0, 0}) == 0.0);
  CHECK(global_images_per_sec({}) == 0.0);
  CHECK_THROWS_WITH_AS(global_images_per_sec({1, 2, 3}),
                       "global_images_per_sec: 3 values, expected (images, seconds) pairs", nano::Error);
}

TEST_CASE("format_nano_result: the exact line benchmark scripts parse") {
  CHECK(format_nano_result(1234.56, 2, 1, 0.90123) ==
        "nano-result: {\"images_per_sec\": 1234.6, \"world_size\": 2, \"threads\": 1, \"accuracy\": 0.9012}");
  CHECK(format_nano_result(87.0, 4, 2, std::nullopt) ==
        "nano-result: {\"images_per_sec\": 87.0, \"world_size\": 4, \"threads\": 2, \"accuracy\": null}");
  CHECK(format_nano_result(87.0, 1, 1, std::nullopt, {23.4125, 0.5}) ==
        "nano-result: {\"images_per_sec\": 87.0, \"world_size\": 1, \"threads\": 1, \"accuracy\": null, "
        "\"step_ms\": [23.413, 0.500]}");
}
