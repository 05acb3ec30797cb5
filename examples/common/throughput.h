#pragma once
// Throughput bookkeeping shared by the example programs: a clock over the timed training
// steps (warm-up steps and evaluation excluded), the global rate of several ranks, and the
// one machine-readable line a benchmark script parses.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nano::examples {

/// Untimed steps at the start of a run: min(3, total_steps / 2), so short smoke runs still
/// time at least half of their steps (the allocator and oneDNN warm up on the first ones).
int64_t warmup_steps_for(int64_t total_steps);

/// Times the training steps of a run after its first `warmup` steps, across epochs; the time
/// between epoch_end() and the next epoch_begin() (evaluation) is not counted.
class StepTimer {
 public:
  explicit StepTimer(int64_t warmup);
  /// Starts (or resumes) the clock when the warm-up is over.
  void epoch_begin();
  /// Records one finished step of `images` images; ends the warm-up after the warmup-th.
  void step_end(int64_t images);
  /// Pauses the clock.
  void epoch_end();
  int64_t images() const { return images_; }  ///< images of the timed steps
  int64_t steps() const { return timed_steps_; }
  double seconds() const { return seconds_; }  ///< wall time of the timed steps
  /// Each timed step's wall time in milliseconds, in order (together about seconds() x 1000).
  const std::vector<double>& step_milliseconds() const { return step_ms_; }

 private:
  using Clock = std::chrono::steady_clock;
  int64_t warmup_;
  int64_t seen_ = 0;
  int64_t timed_steps_ = 0;
  int64_t images_ = 0;
  double seconds_ = 0;
  bool running_ = false;
  Clock::time_point start_;
  Clock::time_point last_;  // end of the previous timed step, or where the clock (re)started
  std::vector<double> step_ms_;
};

/// Global images/s of ranks that trained together, from their (images, seconds) pairs laid
/// out rank-major as Communicator::gather returns them: all images over the slowest rank's
/// time (the ranks step in lock-step, so that is the run's wall time). 0 when no time passed.
/// Throws nano::Error for an odd number of values.
double global_images_per_sec(const std::vector<double>& images_seconds);

/// `nano-result: {"images_per_sec": 1234.5, "world_size": 2, "threads": 1, "accuracy": 0.9012}`
/// (accuracy null when absent), with `"step_ms": [23.412, ...]` appended when `step_ms` is
/// not empty (--step-times). Benchmark scripts parse this line; keep the key names.
std::string format_nano_result(double images_per_sec, int world_size, int threads, std::optional<double> accuracy,
                               const std::vector<double>& step_ms = {});

}  // namespace nano::examples
