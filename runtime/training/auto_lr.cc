#include <nano/auto_lr.h>

#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/types.h>

#include <algorithm>

#include <nano/error.h>

namespace nano {

int64_t auto_lr_length(const AutoLrOptions& o) {
  if (o.warmup_epochs < 0) {
    throw UsageError("nano: auto_lr: bad warmup_epochs=" + std::to_string(o.warmup_epochs) + ": expected >= 0");
  }
  if (o.warmup_epochs > 0) {
    if (o.steps_per_epoch <= 0) {
      throw UsageError("nano: auto_lr: bad steps_per_epoch=" + std::to_string(o.steps_per_epoch) +
                       ": expected > 0 with warmup_epochs=" + std::to_string(o.warmup_epochs));
    }
    return o.warmup_epochs * o.steps_per_epoch;
  }
  if (o.warmup_steps <= 0) {
    throw UsageError("nano: auto_lr: bad warmup_steps=" + std::to_string(o.warmup_steps) + ": expected > 0");
  }
  return o.warmup_steps;
}

double auto_lr_ratio(int64_t step, int world_size, int64_t length) {
  if (world_size <= 1 || length <= 0) return 1.0;
  const int64_t s = std::clamp<int64_t>(step, 0, length);
  return 1.0 + static_cast<double>(world_size - 1) * static_cast<double>(s) / static_cast<double>(length);
}

AutoLr::AutoLr(torch::optim::Optimizer& optimizer, int world_size, AutoLrOptions options)
    : optimizer_(&optimizer),
      world_size_(world_size),
      enabled_(options.enabled && world_size > 1),
      length_(auto_lr_length(options)) {
  apply();
}

double AutoLr::ratio() const { return enabled_ ? auto_lr_ratio(step_, world_size_, length_) : 1.0; }

void AutoLr::step() {
  ++step_;
  apply();
}

double AutoLr::base_lr(std::size_t group) const {
  auto& groups = optimizer_->param_groups();
  if (group >= groups.size()) {
    throw Error("nano: auto_lr: bad param group " + std::to_string(group) + " of " + std::to_string(groups.size()));
  }
  const double lr = groups[group].options().get_lr();
  if (group < base_.size() && lr == last_set_[group]) return base_[group];
  return lr / (group < applied_.size() ? applied_[group] : 1.0);
}

void AutoLr::save(torch::serialize::OutputArchive& archive) const {
  archive.write("step", torch::full({1}, step_, torch::kLong));
  archive.write("base", torch::tensor(base_, torch::kDouble));
}

void AutoLr::load(torch::serialize::InputArchive& archive) {
  torch::Tensor step, base;
  archive.read("step", step);
  archive.read("base", base);
  step_ = step.item<int64_t>();
  auto& groups = optimizer_->param_groups();
  base_.assign(groups.size(), 0.0);
  applied_.assign(groups.size(), 1.0);
  last_set_.assign(groups.size(), 0.0);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    // The rate the optimizer came back with is the saved one; the user's own is in `base`.
    base_[g] = g < static_cast<std::size_t>(base.numel()) ? base[g].item<double>() : groups[g].options().get_lr();
    last_set_[g] = groups[g].options().get_lr();
  }
  apply();
}

void AutoLr::apply() {
  auto& groups = optimizer_->param_groups();
  const double factor = ratio();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    auto& opts = groups[g].options();
    const double base = base_lr(g);  // exact while the user leaves the rate alone
    if (g >= base_.size()) {         // a group added later starts unscaled
      base_.resize(g + 1, 0.0);
      last_set_.resize(g + 1, 0.0);
      applied_.resize(g + 1, 1.0);
    }
    base_[g] = base;
    applied_[g] = factor;
    last_set_[g] = base * factor;
    opts.set_lr(last_set_[g]);
  }
}

}  // namespace nano
