#pragma once
// Batch balancing: synchronous data parallelism runs at the pace of its slowest rank, and
// cores are not always equal (a hybrid CPU's efficiency cores, a cloud VM whose virtual CPUs
// get different shares of the host, one core taking the interrupts). So each global batch
// (ranks x the per-rank batch) is split among the ranks in proportion to their measured
// speed, and DDP weights each rank's gradient by its share: the averaged gradient is still
// the mean over the whole global batch, so the update is the one an equal split would give
// (up to float rounding and batch-statistics layers such as BatchNorm).
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace nano {

class Communicator;
class DistributedDataParallel;

/// Pure: splits `total` samples among speeds.size() ranks in proportion to `speeds`
/// (samples per second, each finite and > 0), every rank getting at least one: floors of the
/// proportional shares, then one more each for the largest remainders (ties: lower rank).
/// Throws UsageError naming the bad value when total < ranks or a speed is not positive.
std::vector<int64_t> apportion(int64_t total, const std::vector<double>& speeds);

/// Pure: the split to use next. `current` is today's split of a global batch; `seconds_per_sample`
/// each rank's measured cost. The candidate apportions the same total by speed (1 / cost); it is
/// taken only when its predicted step (max over ranks of share x cost) is at least `min_gain`
/// (a fraction, e.g. 0.01) shorter than the current split's, so noise does not make the split
/// flap. Throws UsageError on mismatched sizes or a non-positive cost.
std::vector<int64_t> rebalanced_split(const std::vector<int64_t>& current,
                                      const std::vector<double>& seconds_per_sample, double min_gain);

struct BalanceOptions {
  int64_t interval_steps = 8;  ///< steps between two exchanges of the ranks' measured costs
  double min_gain = 0.01;      ///< see rebalanced_split
  double smoothing = 0.5;      ///< weight of the newest window in the running cost estimate
};

/// What the balancer needs from this rank's training: where it waits for the other ranks
/// (so waiting is not counted as work) and how to weight its gradient.
struct BalanceHooks {
  /// Cumulative seconds this rank has spent waiting for gradient averaging (DDP's
  /// sync_wait_seconds()); may return 0 while no DDP exists yet.
  std::function<double()> sync_wait_seconds;
  /// Sets the factor this rank's next gradients are multiplied by before averaging
  /// (DDP's set_gradient_weight()).
  std::function<void(double)> set_gradient_weight;
  /// Monotonic seconds; empty = std::chrono::steady_clock.
  std::function<double()> clock;
};

/// The effectful part, one per loader on each rank. The loader's sampler calls next_step()
/// once per batch on every rank in lock-step (the loop every DDP program already runs).
/// Each call measures this rank's work since the previous call (elapsed time minus the time it
/// waited for the others); after 2, 4, 8... calls and then every interval_steps calls the ranks
/// all-reduce their costs (a small collective on `comm`) and all adopt the same new split.
/// Not thread-safe: use it from the training thread (a loader with workers = 0).
class BatchBalancer {
 public:
  /// `global_batch` = ranks x per-rank batch; starts with the equal split.
  BatchBalancer(std::shared_ptr<Communicator> comm, int64_t global_batch, BalanceHooks hooks,
                BalanceOptions options = {});

  /// A range of rows of one global batch.
  struct Slice {
    int64_t begin = 0;
    int64_t length = 0;
  };

  /// This rank's rows of the next global batch of `global_count` (<= global_batch, >= ranks)
  /// samples; sets the gradient weight ranks x length / global_count. Collective every
  /// interval_steps calls.
  Slice next_step(int64_t global_count);

  /// A new pass over the data: the time until the first next_step() (evaluation, logging) is
  /// not measured.
  void epoch_begin();

  /// Takes a saved split (a checkpoint's) when it fits this balancer (one share per rank, each
  /// >= 1, summing to global_batch); another world's split is ignored: the equal one stays.
  /// Returns whether it was taken. Every rank must pass the same split.
  bool resume_split(const std::vector<int64_t>& split);

  int64_t global_batch() const { return global_batch_; }
  int ranks() const { return ranks_; }
  int rank() const { return rank_; }
  /// Today's split of a full global batch (the same on every rank).
  const std::vector<int64_t>& split() const { return split_; }
  /// Smoothed seconds per sample of every rank (0 until the first exchange).
  const std::vector<double>& seconds_per_sample() const { return cost_; }

 private:
  double now() const;
  double wait_seconds() const;
  void exchange();

  std::weak_ptr<Communicator> comm_;
  int rank_;
  int ranks_;
  int64_t global_batch_;
  BalanceHooks hooks_;
  BalanceOptions options_;
  std::vector<int64_t> split_;
  std::vector<double> cost_;
  int64_t steps_ = 0;       // next_step() calls since construction
  bool have_last_ = false;  // a previous call in this epoch to measure from
  double last_time_ = 0;
  double last_wait_ = 0;
  int64_t last_count_ = 0;     // samples this rank took at the previous call
  double window_seconds_ = 0;  // this rank's measured work since the last exchange
  int64_t window_samples_ = 0;
};

/// Hooks that read the wait time of, and set the gradient weight on, whatever DDP `current()`
/// returns at the time of the call (null: no wait, no weight).
BalanceHooks ddp_balance_hooks(std::function<DistributedDataParallel*()> current);

/// A balancer for the loader that feeds `ddp` (`per_rank_batch` samples per rank on average):
/// it reads ddp's wait time and sets its gradient weight. `ddp` must outlive the balancer.
std::shared_ptr<BatchBalancer> make_batch_balancer(DistributedDataParallel& ddp, int64_t per_rank_batch,
                                                   BalanceOptions options = {});

}  // namespace nano
