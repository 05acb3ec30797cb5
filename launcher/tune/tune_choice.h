#pragma once
// How `nano-run --tune` turns what its trials measured into a choice: one trial's figures from
// its step times (or the program's own metric lines), each layout's rate and noise over its
// trials, the ranking with its rule for ties (within noise, fewer ranks win), and when the
// ranking is settled. Pure: numbers in, decisions out, table-tested.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "launcher/tune/tune_candidates.h"

namespace nano {

/// What a layout's rate counts.
enum class RateUnit {
  kSamples,     ///< samples/s over the whole world (every rank told its batch)
  kRankSteps,   ///< steps/s summed over ranks (the batch is unknown; each rank trains its own)
  kMetric,      ///< the program's own figure for the whole job (--tune-metric), higher is better
  kRankMetric,  ///< the program's own figure of each rank, summed (--tune-metric-per-rank)
};
/// "samples/s", "rank-steps/s", "job metric", "sum of ranks' metric".
const char* rate_unit_name(RateUnit unit);

/// One rank's steps in a trial: when each ended (seconds on one clock) and how many samples it
/// took (0 = unknown).
struct StepLog {
  std::vector<double> ends;
  std::vector<long long> samples;
};

/// One rank's all-reduces in a trial, as the nano torch backend reports them: when each ended
/// (seconds on one clock) and its bytes.
struct CollectiveLog {
  std::vector<double> ends;
  std::vector<long long> bytes;
};

/// The training steps of a DDP program from its all-reduces: their sizes repeat with the
/// period of one step (its buckets, in order, and whatever else it reduces each step). The
/// shortest period that repeats at least three times at the end of the log is taken, and
/// followed back as far as it holds; each period's last all-reduce ends a step (samples
/// unknown). Empty when no period shows.
StepLog steps_from_collectives(const CollectiveLog& log);

/// What one trial measured.
struct TrialMeasure {
  bool ok = false;
  std::string failure;  ///< why not ok ("rank 3 was killed by SIGKILL", "no step after warm-up")
  double rate = 0;      ///< in `unit`
  double noise = 0;     ///< the rate's relative standard error within the trial (0.02 = 2 %)
  int steps = 0;        ///< steps (or metric lines) measured, warm-up excluded
  double seconds = 0;   ///< the measured window
  RateUnit unit = RateUnit::kRankSteps;
};

/// A trial's figures from every rank's steps, the first `warmup` steps of each discarded. The
/// rate is the sum of the ranks' rates; samples/s when every measured step told its samples,
/// else rank-steps/s. Not ok when a rank has fewer than two steps after the warm-up.
TrialMeasure measure_steps(const std::vector<StepLog>& ranks, int warmup);
/// A trial's figures from the program's own metric values, in order, the first `warmup`
/// discarded: their median, and its noise. Not ok without a value after the warm-up.
TrialMeasure measure_metric(const std::vector<double>& values, int warmup);
/// A trial's figures from each rank's own metric values (`ranks[r]`, in order, the first
/// `warmup` of each discarded): the sum of the ranks' medians, the job's rate when every rank
/// prints its own speed; its noise combines the ranks' (root sum of squares). Not ok when a rank
/// has no value after the warm-up (the failure names the first such rank).
TrialMeasure measure_rank_metrics(const std::vector<std::vector<double>>& ranks, int warmup);

/// Every trial of one layout.
struct LayoutTrials {
  Layout layout;
  std::vector<TrialMeasure> trials;
};

/// The ranking after some rounds.
struct Ranking {
  std::vector<double> rate;           ///< by layout: the median of its good trials (0 = none good)
  std::vector<double> noise;          ///< by layout: relative noise of that rate
  std::vector<std::size_t> order;     ///< layouts, fastest first; failed ones last, in their order
  std::optional<std::size_t> winner;  ///< none when every layout failed
  /// Why the winner is not the fastest, when it is not ("within 1.8 % of 4 ranks x ...: fewer
  /// ranks win"); "" otherwise.
  std::string tie;
};

/// The smallest relative noise assumed of any rate: what one VM's run-to-run jitter is at
/// least, whatever a trial's own spread says.
inline constexpr double kNoiseFloor = 0.02;

/// Ranks the layouts (given fewest ranks first, as candidate_layouts orders them). A layout's
/// rate is the median of its good trials; its noise the largest of kNoiseFloor and twice the
/// rate's relative standard error over its k trials, within them (the root sum of squares of
/// their own noises, over k) or between them (their rates' spread). The winner is the layout with the fewest ranks
/// (then the first given) whose rate is within the larger of its and the fastest's noise of the fastest.
Ranking rank_layouts(const std::vector<LayoutTrials>& layouts);

/// The layouts worth another trial: the winner and every good layout within three times the
/// larger noise of it, in the order given (interleaved with the others' trials by the caller).
std::vector<std::size_t> contenders(const std::vector<LayoutTrials>& layouts, const Ranking& ranking);

/// Whether tuning may stop after `rounds` rounds: no winner (all failed), or a single
/// contender, or the winner of this round is that of the round before and won by no tie, or
/// `max_rounds` reached.
bool ranking_settled(const std::optional<std::size_t>& previous_winner, const Ranking& now, std::size_t contender_count,
                     int rounds, int max_rounds);

}  // namespace nano
