#pragma once
// `nano-run --tune`: short trials of the user's own program at candidate layouts, measured by
// the runtime's step reports (runtime/timeline/step_report.h) or the program's own metric lines, until
// the ranking is settled (launcher/tune/tune_choice.h). Each trial is a quiet launch (launcher/launch/launcher.h) in a
// folder of its own that goes with it, stopped once it measured enough and bounded in time; a
// failed trial is reported and skipped. This file is the shell; the decisions are the pure
// functions of launcher/tune/tune_candidates.h and launcher/tune/tune_choice.h.
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "launcher/prepare/launch_types.h"
#include "launcher/tune/program_timing.h"
#include "launcher/tune/tune_candidates.h"
#include "launcher/tune/tune_choice.h"
#include "launcher/tune/tune_store.h"

namespace nano {

/// What a tuning is asked.
struct TuneOptions {
  CandidateRequest candidates;
  /// Each trial measures this long after its warm-up (--tune-seconds)...
  std::chrono::milliseconds measure{std::chrono::seconds(8)};
  /// ...or this many steps (--tune-steps; 0 = by time).
  int steps = 0;
  /// --tune-metric / --tune-metric-per-rank: a regular expression (ECMAScript) whose first group
  /// (or whole match) on a line of output is the program's own throughput; "" = the runtime's
  /// steps.
  std::string metric;
  /// What `metric`'s figure is: false (--tune-metric), the whole job's rate, read from rank 0's
  /// output; true (--tune-metric-per-rank), each rank's own rate, read from every rank's output
  /// and summed. A per-rank figure read as the job's would always choose 1 rank.
  bool metric_per_rank = false;
  /// Steps (or metric lines) of each trial left out: the first steps' page faults and lazy
  /// initialisation are no layout's speed.
  int warmup = 3;
  /// Rounds of trials at most (the first tries every layout, the next the contenders).
  int max_rounds = 3;
};

/// `o` set to run `layout`: its rank count and allocator (the planner gives the threads). What
/// a trial and -n auto launch.
LaunchOptions with_layout(LaunchOptions o, const Layout& layout);

/// Every check that would fail all trials, before any starts; the layouts to try. Throws
/// SettingError (one setting wrong: a candidate the planner refuses, a bad regex, a program
/// that cannot be timed without --tune-metric, a setting that fixes what tuning chooses, more
/// than one host) or UsageError (the program cannot run, an allocator is not installed).
std::vector<Layout> prepare_tuning(const LaunchOptions& base, const TuneOptions& options,
                                   const std::vector<std::string>& argv);

/// What a tuning found.
struct TuneResult {
  std::vector<LayoutTrials> layouts;
  Ranking ranking;
  RateUnit unit = RateUnit::kRankSteps;
  int trials = 0;
  int rounds = 0;
  double seconds = 0;      ///< the whole tuning, wall clock
  int interrupted_by = 0;  ///< the signal that stopped it (SIGINT...): nothing is chosen then
};

/// Runs the trials of `layouts` (prepare_tuning's) and ranks them; `say` gets one line per
/// trial as it ends. A Ctrl-C stops the trial in progress (as nano-run stops a world) and the
/// tuning with it (interrupted_by).
TuneResult tune(const LaunchOptions& base, const TuneOptions& options, const std::vector<std::string>& argv,
                const std::vector<Layout>& layouts, const std::function<void(const std::string&)>& say);

/// The result as a table: each layout's rate, its ratio to the best, how it was measured; the
/// winner marked, and why when a tie made it.
std::string format_tune_table(const TuneResult& result, const TuneOptions& options,
                              FrontEnd front_end = FrontEnd::kCommandLine);

/// Who speaks in the tuning's lines: "nano-run" for its command line, "nano" in a program.
std::string tuning_speaker(FrontEnd front_end);

/// What -n auto keys a program by: argv with argv[0] resolved on PATH (as the launch runs it).
std::vector<std::string> program_key(const std::vector<std::string>& argv);

/// The winner of `result` as a store entry.
TuneEntry tune_entry_of(const TuneResult& result, const std::string& fingerprint,
                        const std::vector<std::string>& program);

}  // namespace nano
