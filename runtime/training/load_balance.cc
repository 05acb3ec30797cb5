#include <nano/load_balance.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>

#include <nano/communicator.h>
#include <nano/ddp.h>
#include <nano/error.h>

namespace nano {

namespace {

bool positive(double x) { return std::isfinite(x) && x > 0; }

double predicted_step(const std::vector<int64_t>& split, const std::vector<double>& cost) {
  double worst = 0;
  for (std::size_t i = 0; i < split.size(); ++i) worst = std::max(worst, static_cast<double>(split[i]) * cost[i]);
  return worst;
}

}  // namespace

std::vector<int64_t> apportion(int64_t total, const std::vector<double>& speeds) {
  const auto ranks = static_cast<int64_t>(speeds.size());
  if (ranks == 0) throw UsageError("nano: apportion: no ranks to split " + std::to_string(total) + " samples among");
  if (total < ranks) {
    throw UsageError("nano: apportion: bad total " + std::to_string(total) + ": fewer samples than the " +
                     std::to_string(ranks) + " ranks");
  }
  for (std::size_t i = 0; i < speeds.size(); ++i) {
    if (!positive(speeds[i])) {
      throw UsageError("nano: apportion: bad speed " + std::to_string(speeds[i]) + " of rank " + std::to_string(i) +
                       ": expected a finite number > 0");
    }
  }
  // One sample each first, so no rank is ever left without a batch; the rest by speed.
  const double sum = std::accumulate(speeds.begin(), speeds.end(), 0.0);
  const int64_t rest = total - ranks;
  std::vector<int64_t> split(ranks, 1);
  std::vector<double> remainder(ranks);
  int64_t given = 0;
  for (int64_t i = 0; i < ranks; ++i) {
    const double exact = static_cast<double>(rest) * speeds[i] / sum;
    const auto whole = std::min(rest - given, static_cast<int64_t>(std::floor(exact)));
    split[i] += whole;
    given += whole;
    remainder[i] = exact - std::floor(exact);
  }
  std::vector<int64_t> order(ranks);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return remainder[a] > remainder[b]; });
  for (int64_t k = 0; given < rest; k = (k + 1) % ranks, ++given) ++split[order[k]];
  return split;
}

std::vector<int64_t> rebalanced_split(const std::vector<int64_t>& current,
                                      const std::vector<double>& seconds_per_sample, double min_gain) {
  if (current.size() != seconds_per_sample.size()) {
    throw UsageError("nano: rebalanced_split: " + std::to_string(current.size()) + " shares but " +
                     std::to_string(seconds_per_sample.size()) + " costs");
  }
  std::vector<double> speeds(current.size());
  for (std::size_t i = 0; i < current.size(); ++i) {
    if (!positive(seconds_per_sample[i])) {
      throw UsageError("nano: rebalanced_split: bad cost " + std::to_string(seconds_per_sample[i]) + " of rank " +
                       std::to_string(i) + ": expected seconds per sample > 0");
    }
    speeds[i] = 1.0 / seconds_per_sample[i];
  }
  const int64_t total = std::accumulate(current.begin(), current.end(), int64_t{0});
  std::vector<int64_t> candidate = apportion(total, speeds);
  const double now = predicted_step(current, seconds_per_sample);
  const double then = predicted_step(candidate, seconds_per_sample);
  return then <= now * (1.0 - min_gain) ? candidate : current;
}

BatchBalancer::BatchBalancer(std::shared_ptr<Communicator> comm, int64_t global_batch, BalanceHooks hooks,
                             BalanceOptions options)
    : comm_(comm),
      rank_(comm ? comm->rank() : 0),
      ranks_(comm ? comm->size() : 0),
      global_batch_(global_batch),
      hooks_(std::move(hooks)),
      options_(options) {
  if (!comm) throw Error("nano: BatchBalancer: null communicator");
  if (options_.interval_steps < 1) {
    throw UsageError("nano: BatchBalancer: bad interval_steps=" + std::to_string(options_.interval_steps) +
                     ": expected >= 1");
  }
  if (!(options_.smoothing > 0 && options_.smoothing <= 1)) {
    throw UsageError("nano: BatchBalancer: bad smoothing=" + std::to_string(options_.smoothing) +
                     ": expected a weight in (0, 1]");
  }
  split_ = apportion(global_batch_, std::vector<double>(ranks_, 1.0));  // throws for global_batch < ranks
  cost_.assign(ranks_, 0.0);
}

double BatchBalancer::now() const {
  if (hooks_.clock) return hooks_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double BatchBalancer::wait_seconds() const { return hooks_.sync_wait_seconds ? hooks_.sync_wait_seconds() : 0.0; }

void BatchBalancer::epoch_begin() { have_last_ = false; }

bool BatchBalancer::resume_split(const std::vector<int64_t>& split) {
  if (split.size() != static_cast<std::size_t>(ranks_)) return false;
  int64_t sum = 0;
  for (int64_t share : split) {
    if (share < 1) return false;
    sum += share;
  }
  if (sum != global_batch_) return false;
  split_ = split;
  return true;
}

BatchBalancer::Slice BatchBalancer::next_step(int64_t global_count) {
  if (global_count < ranks_ || global_count > global_batch_) {
    throw Error("nano: BatchBalancer: bad global batch of " + std::to_string(global_count) + " samples: expected " +
                std::to_string(ranks_) + ".." + std::to_string(global_batch_));
  }
  if (have_last_) {
    // Work = time since the previous batch was handed out, less the time spent waiting for the
    // slower ranks inside the gradient all-reduce.
    const double work = (now() - last_time_) - (wait_seconds() - last_wait_);
    if (work > 0 && last_count_ > 0) {
      window_seconds_ += work;
      window_samples_ += last_count_;
    }
  }
  // Exchange early and often at first (after 2, 4, 8... steps), so a long-step model is
  // balanced within its first few steps; then every interval_steps.
  ++steps_;
  const bool ramp = steps_ < options_.interval_steps;
  if (ramp ? steps_ >= 2 && (steps_ & (steps_ - 1)) == 0 : steps_ % options_.interval_steps == 0) exchange();

  std::vector<int64_t> split = split_;
  if (global_count != global_batch_) {
    std::vector<double> speeds(ranks_, 1.0);
    if (std::all_of(cost_.begin(), cost_.end(), positive)) {
      for (int i = 0; i < ranks_; ++i) speeds[i] = 1.0 / cost_[i];
    }
    split = apportion(global_count, speeds);
  }
  Slice slice{std::accumulate(split.begin(), split.begin() + rank_, int64_t{0}), split[rank_]};
  if (hooks_.set_gradient_weight) {
    hooks_.set_gradient_weight(static_cast<double>(ranks_) * static_cast<double>(slice.length) /
                               static_cast<double>(global_count));
  }
  last_count_ = slice.length;
  last_wait_ = wait_seconds();
  last_time_ = now();  // after the exchange, so its own wait is not counted as work
  have_last_ = true;
  return slice;
}

void BatchBalancer::exchange() {
  const std::shared_ptr<Communicator> comm = comm_.lock();
  if (!comm) throw Error("nano: BatchBalancer: the world's communicator is gone (shut down before the loader)");
  // Each rank fills its own two slots; the sum gives everyone every rank's window.
  at::Tensor table = at::zeros({2 * ranks_}, at::kDouble);
  auto* t = table.data_ptr<double>();
  t[2 * rank_] = window_seconds_;
  t[2 * rank_ + 1] = static_cast<double>(window_samples_);
  comm->all_reduce(table, ReduceOp::kSum);
  window_seconds_ = 0;
  window_samples_ = 0;

  std::vector<double> fresh(ranks_);
  for (int i = 0; i < ranks_; ++i) {
    if (!(t[2 * i] > 0 && t[2 * i + 1] > 0)) return;  // a rank has no clean measurement yet
    fresh[i] = t[2 * i] / t[2 * i + 1];
  }
  for (int i = 0; i < ranks_; ++i) {
    cost_[i] = cost_[i] > 0 ? (1 - options_.smoothing) * cost_[i] + options_.smoothing * fresh[i] : fresh[i];
  }
  split_ = rebalanced_split(split_, cost_, options_.min_gain);
}

BalanceHooks ddp_balance_hooks(std::function<DistributedDataParallel*()> current) {
  BalanceHooks hooks;
  hooks.sync_wait_seconds = [current] {
    const DistributedDataParallel* ddp = current();
    return ddp ? ddp->sync_wait_seconds() : 0.0;
  };
  hooks.set_gradient_weight = [current](double weight) {
    if (DistributedDataParallel* ddp = current()) ddp->set_gradient_weight(weight);
  };
  return hooks;
}

std::shared_ptr<BatchBalancer> make_batch_balancer(DistributedDataParallel& ddp, int64_t per_rank_batch,
                                                   BalanceOptions options) {
  if (per_rank_batch < 1) {
    throw UsageError("nano: make_batch_balancer: bad per_rank_batch=" + std::to_string(per_rank_batch) +
                     ": expected >= 1");
  }
  return std::make_shared<BatchBalancer>(ddp.comm_ptr(), per_rank_batch * ddp.comm().size(),
                                         ddp_balance_hooks([&ddp] { return &ddp; }), options);
}

}  // namespace nano
