#include "launcher/tune/tune_choice.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

namespace nano {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The relative standard error of the mean of `v` (0 for fewer than two values).
double relative_error(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  if (mean == 0) return 0;
  double sq = 0;
  for (double x : v) sq += (x - mean) * (x - mean);
  const double sd = std::sqrt(sq / (v.size() - 1));
  return sd / std::abs(mean) / std::sqrt(static_cast<double>(v.size()));
}

std::string percent(double fraction) {
  std::ostringstream out;
  out.precision(2);
  out << std::fixed << fraction * 100 << " %";
  return out.str();
}

}  // namespace

const char* rate_unit_name(RateUnit unit) {
  switch (unit) {
    case RateUnit::kSamples: return "samples/s";
    case RateUnit::kRankSteps: return "rank-steps/s";
    case RateUnit::kMetric: return "job metric";
    case RateUnit::kRankMetric: break;
  }
  return "sum of ranks' metric";
}

StepLog steps_from_collectives(const CollectiveLog& log) {
  StepLog steps;
  const std::vector<long long>& s = log.bytes;
  const std::size_t m = std::min(s.size(), log.ends.size());
  std::size_t period = 0;
  for (std::size_t p = 1; 3 * p <= m && !period; ++p) {
    bool repeats = true;
    for (std::size_t i = m - 2 * p; i < m && repeats; ++i) repeats = s[i] == s[i - p];
    if (repeats) period = p;
  }
  if (!period) return steps;
  std::size_t start = m - 2 * period;  // the earliest i with s[i] == s[i - period] all the way up
  while (start > period && s[start - 1] == s[start - 1 - period]) --start;
  std::vector<double> ends;
  for (std::size_t e = m; e >= start && e >= period; e -= period) ends.push_back(log.ends[e - 1]);
  steps.ends.assign(ends.rbegin(), ends.rend());
  steps.samples.assign(steps.ends.size(), 0);
  return steps;
}

TrialMeasure measure_steps(const std::vector<StepLog>& ranks, int warmup) {
  TrialMeasure m;
  if (ranks.empty()) {
    m.failure = "no rank reported a step";
    return m;
  }
  bool samples_known = true;
  double rate_steps = 0, rate_samples = 0, noise_sq = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const StepLog& log = ranks[r];
    const std::size_t first = static_cast<std::size_t>(std::max(warmup, 0));
    if (log.ends.size() < first + 2) {
      m.failure = "rank " + std::to_string(r) + " measured " +
                  std::to_string(log.ends.size() > first ? log.ends.size() - first : 0) +
                  " steps after its warm-up of " + std::to_string(warmup) + " (at least 2 needed)";
      return m;
    }
    const double window = log.ends.back() - log.ends[first];
    if (window <= 0) {
      m.failure = "rank " + std::to_string(r) + "'s steps took no time";
      return m;
    }
    const std::size_t steps = log.ends.size() - 1 - first;
    std::vector<double> gaps;
    long long samples = 0;
    for (std::size_t i = first + 1; i < log.ends.size(); ++i) {
      gaps.push_back(log.ends[i] - log.ends[i - 1]);
      const long long s = i < log.samples.size() ? log.samples[i] : 0;
      if (s <= 0) samples_known = false;
      samples += s;
    }
    rate_steps += steps / window;
    rate_samples += samples / window;
    const double e = relative_error(gaps);
    noise_sq = std::max(noise_sq, e * e);
    if (r == 0) {
      m.steps = static_cast<int>(steps);
      m.seconds = window;
    }
  }
  m.ok = true;
  m.unit = samples_known ? RateUnit::kSamples : RateUnit::kRankSteps;
  m.rate = samples_known ? rate_samples : rate_steps;
  m.noise = std::sqrt(noise_sq);
  return m;
}

TrialMeasure measure_metric(const std::vector<double>& values, int warmup) {
  TrialMeasure m;
  m.unit = RateUnit::kMetric;
  const std::size_t first = static_cast<std::size_t>(std::max(warmup, 0));
  if (values.size() <= first) {
    m.failure = "the metric appeared " + std::to_string(values.size()) + " times, not after the warm-up of " +
                std::to_string(warmup);
    return m;
  }
  const std::vector<double> kept(values.begin() + static_cast<long>(first), values.end());
  m.ok = true;
  m.rate = median(kept);
  m.noise = relative_error(kept);
  m.steps = static_cast<int>(kept.size());
  return m;
}

TrialMeasure measure_rank_metrics(const std::vector<std::vector<double>>& ranks, int warmup) {
  TrialMeasure sum;
  sum.unit = RateUnit::kRankMetric;
  double noise_sq = 0;  // of the sum, in its own units
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const TrialMeasure one = measure_metric(ranks[r], warmup);
    if (!one.ok) {
      sum.failure = "rank " + std::to_string(r) + ": " + one.failure;
      return sum;
    }
    sum.rate += one.rate;
    noise_sq += (one.noise * one.rate) * (one.noise * one.rate);
    sum.steps = r == 0 ? one.steps : std::min(sum.steps, one.steps);
  }
  if (ranks.empty()) {
    sum.failure = "no rank printed the metric";
    return sum;
  }
  sum.ok = true;
  sum.noise = sum.rate > 0 ? std::sqrt(noise_sq) / sum.rate : 0;
  return sum;
}

Ranking rank_layouts(const std::vector<LayoutTrials>& layouts) {
  Ranking r;
  const std::size_t n = layouts.size();
  r.rate.assign(n, 0);
  r.noise.assign(n, kNoiseFloor);
  std::vector<std::size_t> good, failed;
  for (std::size_t i = 0; i < n; ++i) {
    std::vector<double> rates;
    double own_sq = 0;
    for (const TrialMeasure& t : layouts[i].trials) {
      if (!t.ok) continue;
      rates.push_back(t.rate);
      own_sq += t.noise * t.noise;
    }
    if (rates.empty()) {
      failed.push_back(i);
      continue;
    }
    r.rate[i] = median(rates);
    // The relative standard errors of a rate over k trials: within them (their step times),
    // and between them (how their rates disagree); twice the larger is the noise.
    const double k = static_cast<double>(rates.size());
    const double within = std::sqrt(own_sq) / k;
    const double between = relative_error(rates);
    r.noise[i] = std::max({kNoiseFloor, 2 * within, 2 * between});
    good.push_back(i);
  }
  std::stable_sort(good.begin(), good.end(), [&](std::size_t a, std::size_t b) { return r.rate[a] > r.rate[b]; });
  r.order = good;
  r.order.insert(r.order.end(), failed.begin(), failed.end());
  if (good.empty()) return r;
  const std::size_t fastest = good.front();
  // The fewest ranks (then the first given) among the layouts within noise of the fastest.
  std::size_t winner = fastest;
  for (std::size_t i : good) {
    const double tolerance = std::max(r.noise[i], r.noise[fastest]);
    if (r.rate[i] < r.rate[fastest] * (1 - tolerance)) continue;
    const bool fewer = layouts[i].layout.ranks < layouts[winner].layout.ranks;
    const bool same_first = layouts[i].layout.ranks == layouts[winner].layout.ranks && i < winner;
    if (fewer || same_first) winner = i;
  }
  r.winner = winner;
  if (winner != fastest) {
    r.tie = layout_text(layouts[winner].layout) + " is within " + percent(1 - r.rate[winner] / r.rate[fastest]) +
            " of " + layout_text(layouts[fastest].layout) + " (noise " +
            percent(std::max(r.noise[winner], r.noise[fastest])) + "): fewer ranks win";
  }
  return r;
}

std::vector<std::size_t> contenders(const std::vector<LayoutTrials>& layouts, const Ranking& ranking) {
  std::vector<std::size_t> out;
  if (!ranking.winner) return out;
  const std::size_t w = *ranking.winner;
  const double best = ranking.rate[ranking.order.front()];
  for (std::size_t i = 0; i < layouts.size(); ++i) {
    if (ranking.rate[i] <= 0) continue;
    const double tolerance = 3 * std::max(ranking.noise[i], ranking.noise[w]);
    if (i == w || ranking.rate[i] >= best * (1 - tolerance)) out.push_back(i);
  }
  return out;
}

bool ranking_settled(const std::optional<std::size_t>& previous_winner, const Ranking& now, std::size_t contender_count,
                     int rounds, int max_rounds) {
  if (!now.winner || contender_count <= 1 || rounds >= max_rounds) return true;
  // A winner by a tie is not settled: more trials narrow the noise that made it.
  return rounds >= 2 && previous_winner == now.winner && now.tie.empty();
}

}  // namespace nano
