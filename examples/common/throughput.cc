#include "examples/common/throughput.h"

#include <algorithm>
#include <cstdio>

#include <nano/error.h>

namespace nano::examples {

int64_t warmup_steps_for(int64_t total_steps) { return std::min<int64_t>(3, std::max<int64_t>(total_steps, 0) / 2); }

StepTimer::StepTimer(int64_t warmup) : warmup_(std::max<int64_t>(warmup, 0)) {}

void StepTimer::epoch_begin() {
  if (seen_ >= warmup_ && !running_) {
    running_ = true;
    start_ = last_ = Clock::now();
  }
}

void StepTimer::step_end(int64_t images) {
  if (seen_ < warmup_) {
    if (++seen_ == warmup_) {
      running_ = true;
      start_ = last_ = Clock::now();
    }
    return;
  }
  const Clock::time_point now = Clock::now();
  step_ms_.push_back(std::chrono::duration<double, std::milli>(now - last_).count());
  last_ = now;
  ++seen_;
  ++timed_steps_;
  images_ += images;
}

void StepTimer::epoch_end() {
  if (!running_) return;
  seconds_ += std::chrono::duration<double>(Clock::now() - start_).count();
  running_ = false;
}

double global_images_per_sec(const std::vector<double>& images_seconds) {
  if (images_seconds.size() % 2 != 0)
    throw Error("global_images_per_sec: " + std::to_string(images_seconds.size()) +
                " values, expected (images, seconds) pairs");
  double images = 0, seconds = 0;
  for (size_t i = 0; i < images_seconds.size(); i += 2) {
    images += images_seconds[i];
    seconds = std::max(seconds, images_seconds[i + 1]);
  }
  return seconds > 0 ? images / seconds : 0.0;
}

std::string format_nano_result(double images_per_sec, int world_size, int threads, std::optional<double> accuracy,
                               const std::vector<double>& step_ms) {
  char acc[32] = "null";
  if (accuracy) std::snprintf(acc, sizeof acc, "%.4f", *accuracy);
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "nano-result: {\"images_per_sec\": %.1f, \"world_size\": %d, \"threads\": %d, \"accuracy\": %s",
                images_per_sec, world_size, threads, acc);
  std::string line = buf;
  if (!step_ms.empty()) {
    line += ", \"step_ms\": [";
    for (std::size_t i = 0; i < step_ms.size(); ++i) {
      std::snprintf(buf, sizeof buf, "%s%.3f", i ? ", " : "", step_ms[i]);
      line += buf;
    }
    line += "]";
  }
  return line + "}";
}

}  // namespace nano::examples
