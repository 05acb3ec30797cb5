#pragma once
// auto_lr: the global batch grows N-fold with N ranks, so the learning rate warms up linearly
// from the user's rate to N times it (BigDL-Nano TorchNano's schedule).
#include <cstdint>
#include <vector>

namespace torch {
namespace optim {
class Optimizer;
}
namespace serialize {
class InputArchive;
class OutputArchive;
}  // namespace serialize
}  // namespace torch

namespace nano {

struct AutoLrOptions {
  bool enabled = true;          ///< only has an effect when world_size > 1
  int64_t warmup_steps = 1000;  ///< L, in optimizer steps (used when warmup_epochs == 0)
  int64_t warmup_epochs = 0;    ///< > 0: L = warmup_epochs * steps_per_epoch
  int64_t steps_per_epoch = 0;  ///< required with warmup_epochs
};

/// Pure: the warm-up length in steps; throws UsageError naming a bad value.
int64_t auto_lr_length(const AutoLrOptions& options);

/// Pure: ratio = 1 + (N-1) * min(step, L) / L; 1 when disabled or N == 1.
double auto_lr_ratio(int64_t step, int world_size, int64_t length);

/// Applies the ratio to every param group of any optimizer, multiplying (not replacing) the
/// group's current rate: the last factor applied is divided out before the new one is
/// applied, so a user schedule that scales the rate in between still composes.
/// Construct after the optimizer (step 0, ratio 1); call step() after each optimizer.step().
class AutoLr {
 public:
  AutoLr(torch::optim::Optimizer& optimizer, int world_size, AutoLrOptions options = {});
  /// Advances one optimizer step and applies the new ratio.
  void step();
  int64_t steps() const { return step_; }
  double ratio() const;
  /// The warm-up position (step count and each group's own rate), for checkpoints. load()
  /// expects the optimizer's state already loaded and applies the ratio of this world size,
  /// so a run resumed with another number of ranks warms up towards that number.
  void save(torch::serialize::OutputArchive& archive) const;
  void load(torch::serialize::InputArchive& archive);
  /// The user's rate of group g (current rate with the warm-up factor divided out).
  double base_lr(std::size_t group) const;

 private:
  void apply();
  torch::optim::Optimizer* optimizer_;
  int world_size_;
  bool enabled_;
  int64_t length_;
  int64_t step_ = 0;
  std::vector<double> applied_;   // factor currently multiplied into each group's rate
  std::vector<double> base_;      // each group's user rate
  std::vector<double> last_set_;  // the rate apply() wrote; a different one means the user moved it
};

}  // namespace nano
