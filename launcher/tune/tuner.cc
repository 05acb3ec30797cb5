#include "launcher/tune/tuner.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nano/error.h>
#include "core/rank_contract.h"
#include "core/setting.h"
#include "launcher/launch/launcher.h"
#include "launcher/prepare/launch_setup.h"
#include "launcher/process/subprocess.h"
#include "launcher/process/timeouts.h"
#include "launcher/supervise/root_cause.h"
#include "launcher/tune/program_timing.h"

namespace nano {
namespace {

using Clock = std::chrono::steady_clock;

// The step report's variables (runtime/timeline/step_report.h): program_timing.h recognises a program that
// links the runtime by the first name.
constexpr const char* kReportVar = contract::kTuneReport;
constexpr const char* kTrialVar = contract::kTuneTrial;

// A folder of its own for the whole tuning, gone with it however it ends.
class TuningFolder {
 public:
  TuningFolder() {
    const std::string base = getenv_string("TMPDIR").empty() ? "/tmp" : getenv_string("TMPDIR");
    std::string pattern = base + "/nano-tune-XXXXXX";
    if (!::mkdtemp(pattern.data())) throw Error("cannot make a folder for the tuning's trials in " + base);
    path_ = pattern;
  }
  ~TuningFolder() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TuningFolder(const TuningFolder&) = delete;
  TuningFolder& operator=(const TuningFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// One rank's "SECONDS VALUE" lines (runtime/timeline/step_report.h).
void read_pairs(const std::string& path, std::vector<double>& times, std::vector<long long>& values) {
  std::ifstream in(path);
  double t = 0;
  long long v = 0;
  while (in >> t >> v) {
    times.push_back(t);
    values.push_back(v);
  }
}

// Every rank's steps: from its step reports (nano's runtime) or, where it made none, from its
// all-reduces (the nano torch backend).
std::vector<StepLog> read_step_logs(const std::string& folder, int ranks) {
  std::vector<StepLog> logs(static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    const std::string base = folder + "/rank-" + std::to_string(r);
    StepLog& log = logs[static_cast<size_t>(r)];
    read_pairs(base + ".steps", log.ends, log.samples);
    if (!log.ends.empty()) continue;
    CollectiveLog collectives;
    read_pairs(base + ".collectives", collectives.ends, collectives.bytes);
    log = steps_from_collectives(collectives);
  }
  return logs;
}

std::vector<double> read_metric(const std::string& log, const std::regex& pattern) {
  std::vector<double> values;
  std::ifstream in(log);
  std::string line;
  std::smatch m;
  while (std::getline(in, line)) {
    if (!std::regex_search(line, m, pattern)) continue;
    const std::string figure = m.size() > 1 && m[1].matched ? m[1].str() : m[0].str();
    char* end = nullptr;
    const double v = std::strtod(figure.c_str(), &end);
    if (end != figure.c_str()) values.push_back(v);
  }
  return values;
}

Setting metric_setting(const TuneOptions& options) {
  return options.metric_per_rank ? Setting::kTuneMetricPerRank : Setting::kTuneMetric;
}

std::regex compile_metric(const TuneOptions& options) {
  const std::string& text = options.metric;
  try {
    return std::regex(text, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    const Setting setting = metric_setting(options);
    throw SettingError(
        setting, text,
        "{" + std::string(setting_key(setting)) + "} '" + text + "' is not a regular expression: " + e.what());
  }
}

// Every rank's metric values in a trial's log folder (rank-R.log for R < ranks).
std::vector<std::vector<double>> read_rank_metrics(const std::string& logs, int ranks, const std::regex& pattern) {
  std::vector<std::vector<double>> values;
  for (int r = 0; r < ranks; ++r) values.push_back(read_metric(logs + "/rank-" + std::to_string(r) + ".log", pattern));
  return values;
}

LaunchOptions trial_options(const LaunchOptions& base, const Layout& layout) {
  LaunchOptions o = with_layout(base, layout);
  o.quiet = true;
  o.max_restarts = 0;
  o.timeline.clear();  // a trial is no part of the run the user asked to see
  o.output_ranks.clear();
  o.extra_env[kTrialVar] = "1";
  return o;
}

std::string seconds_text(double s) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(s < 10 ? 1 : 0) << s << " s";
  return out.str();
}

std::string last_line(std::string text) {
  while (!text.empty() && text.back() == '\n') text.pop_back();
  const std::size_t cut = text.find_last_of('\n');
  return cut == std::string::npos ? text : text.substr(cut + 1);
}

std::string failure_text(const LaunchResult& r) {
  if (!r.failure) return "it ended with exit code " + std::to_string(r.exit_code);
  const RankFailure& f = *r.failure;
  std::string text = f.rank < 0 ? "the launcher backend " + describe_end(f.exit_code, f.signal)
                                : "rank " + std::to_string(f.rank) + " " + describe_end(f.exit_code, f.signal);
  if (!f.lost.empty()) text += " (" + f.lost + ")";
  const std::string last = last_line(f.stderr_tail);
  if (!f.raised.empty()) {
    text += ": " + f.raised;
  } else if (!last.empty()) {
    text += ": " + last;
  }
  return text;
}

// One trial: a quiet launch of `argv` at `layout` in `folder`, stopped once it measured enough.
struct TrialRun {
  TrialMeasure measure;
  int interrupted_by = 0;
};

TrialRun run_trial(const LaunchOptions& base, const TuneOptions& options, const std::vector<std::string>& argv,
                   const Layout& layout, const std::string& folder, const std::regex* metric) {
  const std::string steps_folder = folder + "/steps", logs = folder + "/logs";
  std::filesystem::create_directories(steps_folder);
  LaunchOptions o = trial_options(base, layout);
  o.log_dir = logs;
  o.extra_env[kReportVar] = steps_folder;
  const auto started = Clock::now();
  const auto bound =
      kTrialStartAllowance +
      (options.steps > 0 ? std::chrono::duration_cast<std::chrono::milliseconds>(kTrialStepsBound) : options.measure);
  auto next_check = started;
  std::optional<Clock::time_point> warm_since;  // when the warm-up was seen to be over
  bool bounded = false;
  const auto counted = [&]() -> std::size_t {
    if (metric && !options.metric_per_rank) return read_metric(logs + "/rank-0.log", *metric).size();
    if (metric) {  // the slowest rank's count: every rank must have measured enough
      std::size_t fewest = std::numeric_limits<std::size_t>::max();
      for (const auto& v : read_rank_metrics(logs, layout.ranks, *metric)) fewest = std::min(fewest, v.size());
      return fewest;
    }
    return read_step_logs(steps_folder, 1).front().ends.size();
  };
  o.stop_when = [&]() {
    const auto now = Clock::now();
    if (now < next_check) return false;
    next_check = now + kTrialCheckInterval;
    if (now - started >= bound) return bounded = true;
    const std::size_t seen = counted();
    const std::size_t warmup = static_cast<std::size_t>(options.warmup);
    if (options.steps > 0) return seen >= warmup + 1 + static_cast<std::size_t>(options.steps);
    if (seen <= warmup) return false;
    if (!warm_since) warm_since = now;
    return now - *warm_since >= options.measure;
  };
  TrialRun run;
  LaunchResult result;
  try {
    result = launch(o, argv);
  } catch (const std::exception& e) {
    run.measure.failure = e.what();
    return run;
  }
  if (result.interrupted_by) {
    run.interrupted_by = result.interrupted_by;
    return run;
  }
  if (!result.stopped && result.exit_code != 0) {
    run.measure.failure = failure_text(result);
    return run;
  }
  if (metric && options.metric_per_rank) {
    run.measure = measure_rank_metrics(read_rank_metrics(logs, layout.ranks, *metric), options.warmup);
  } else if (metric) {
    run.measure = measure_metric(read_metric(logs + "/rank-0.log", *metric), options.warmup);
  } else {
    const std::vector<StepLog> steps = read_step_logs(steps_folder, layout.ranks);
    run.measure = measure_steps(steps, options.warmup);
    if (steps.front().ends.empty())
      run.measure.failure =
          "it reported no training step (a program on neither nano's runtime nor the nano torch "
          "backend needs --tune-metric)";
  }
  if (!run.measure.ok && bounded)
    run.measure.failure += " within the trial's bound of " + seconds_text(std::chrono::duration<double>(bound).count());
  return run;
}

std::string trial_line(const std::string& speaker, int number, const Layout& layout, const TrialMeasure& m) {
  std::ostringstream out;
  out << speaker << ": tune: trial " << number << ", " << layout_text(layout) << ": ";
  if (!m.ok) {
    out << "failed, skipped (" << m.failure << ")";
    return out.str();
  }
  out << std::fixed << std::setprecision(1) << m.rate << " " << rate_unit_name(m.unit);
  if (m.unit != RateUnit::kMetric && m.unit != RateUnit::kRankMetric)
    out << " (" << m.steps << " steps in " << seconds_text(m.seconds) << ")";
  return out.str();
}

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

}  // namespace

LaunchOptions with_layout(LaunchOptions o, const Layout& layout) {
  o.plan.num_processes = layout.ranks;
  o.recipe.allocator = layout.allocator;
  return o;
}

std::vector<std::string> program_key(const std::vector<std::string>& argv) {
  std::vector<std::string> key = argv;
  if (!key.empty()) {
    try {
      key.front() = std::filesystem::weakly_canonical(resolve_program(key.front(), getenv_string("PATH"))).string();
    } catch (const std::exception&) {
      // a program that does not resolve is keyed as typed (its launch fails anyway)
    }
  }
  return key;
}

std::vector<Layout> prepare_tuning(const LaunchOptions& base, const TuneOptions& options,
                                   const std::vector<std::string>& argv) {
  if (!base.hosts.empty() || !base.hostfile.empty())
    throw SettingError(Setting::kTune, "", "{tune} tunes the ranks of one host; leave out {hosts} and {hostfile}");
  if (base.plan.num_processes > 0)
    throw SettingError(Setting::kTune, std::to_string(base.plan.num_processes),
                       "{tune} chooses {num_processes} itself; leave it out");
  if (base.plan.cores_per_process > 0 || !base.plan.cpu_for_each_process.empty())
    throw SettingError(Setting::kTune, "",
                       "{tune} chooses the cores of each rank itself; leave out {cores_per_process} and "
                       "{cpu_for_each_process}");
  if (options.steps < 0)
    throw SettingError(Setting::kTuneSteps, std::to_string(options.steps), "{tune_steps} must be at least 1");
  if (options.steps == 0 && options.measure <= std::chrono::milliseconds(0))
    throw SettingError(Setting::kTuneSeconds, "0", "{tune_seconds} must be more than 0");
  if (!options.metric.empty()) {
    compile_metric(options);
  } else if (program_timing(argv) == ProgramTiming::kNone) {
    const std::string name = argv.empty() ? "the program" : argv.front();
    throw SettingError(
        Setting::kTuneMetric, "",
        "{tune}: " + name +
            " uses neither nano's runtime nor the nano torch backend, so its steps cannot be timed; give "
            "{tune_metric} REGEX matching a line where it prints its throughput (the first group "
            "is the figure)");
  }
  const Topology topology = load_topology(base.topology_xml, base.synthetic);
  std::vector<Layout> layouts = candidate_layouts(topology, base.plan, base.recipe, options.candidates);
  // Whatever fails for every rank count (the program, an allocator that is not installed, a
  // setting) fails here once, before any trial, with the launcher's own words.
  std::set<Allocator> checked;
  for (const Layout& l : layouts) {
    if (!checked.insert(l.allocator).second) continue;
    LaunchOptions o = trial_options(base, l);
    prepare(o, argv, Purpose::kDryRun);
  }
  return layouts;
}

TuneResult tune(const LaunchOptions& base, const TuneOptions& options, const std::vector<std::string>& argv,
                const std::vector<Layout>& layouts, const std::function<void(const std::string&)>& say) {
  const auto started = Clock::now();
  TuningFolder folder;
  std::optional<std::regex> metric;
  if (!options.metric.empty()) metric = compile_metric(options);
  TuneResult result;
  for (const Layout& l : layouts) result.layouts.push_back({l, {}});
  std::vector<std::size_t> order(layouts.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::optional<std::size_t> previous;
  for (int round = 1;; ++round) {
    for (std::size_t i : order) {
      const std::string dir = folder.path() + "/trial-" + std::to_string(++result.trials);
      TrialRun run = run_trial(base, options, argv, layouts[i], dir, metric ? &*metric : nullptr);
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
      if (run.interrupted_by) {
        result.interrupted_by = run.interrupted_by;
        result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
        return result;
      }
      result.layouts[i].trials.push_back(run.measure);
      if (run.measure.ok) result.unit = run.measure.unit;
      say(trial_line(tuning_speaker(base.front_end), result.trials, layouts[i], run.measure));
    }
    result.rounds = round;
    result.ranking = rank_layouts(result.layouts);
    const std::vector<std::size_t> next = contenders(result.layouts, result.ranking);
    if (ranking_settled(previous, result.ranking, next.size(), round, options.max_rounds)) break;
    previous = result.ranking.winner;
    // The contenders again, the other way round: a drift of the machine's speed over the
    // tuning then favours no layout.
    order.assign(next.rbegin(), next.rend());
  }
  result.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return result;
}

std::string tuning_speaker(FrontEnd front_end) { return front_end == FrontEnd::kCommandLine ? "nano-run" : "nano"; }

std::string format_tune_table(const TuneResult& result, const TuneOptions& options, FrontEnd front_end) {
  std::ostringstream out;
  const Ranking& r = result.ranking;
  out << tuning_speaker(front_end) << ": tuned in " << seconds_text(result.seconds) << ": " << result.trials
      << " trials in " << result.rounds << (result.rounds == 1 ? " round" : " rounds") << ", each " << options.warmup
      << " warm-up steps then ";
  if (options.steps > 0)
    out << options.steps << " measured steps";
  else
    out << seconds_text(std::chrono::duration<double>(options.measure).count()) << " measured";
  if (options.metric.empty())
    out << " (the runtime's step times)";
  else if (options.metric_per_rank)
    out << " (the program's metric: each rank's own figure, summed over the ranks)";
  else
    out << " (the program's metric: the whole job's figure, from rank 0)";
  out << "\n";
  std::size_t width = 6;
  for (const auto& l : result.layouts) width = std::max(width, layout_text(l.layout).size());
  out << "  " << std::left << std::setw(static_cast<int>(width)) << "layout" << std::right << std::setw(14)
      << rate_unit_name(result.unit) << std::setw(9) << "vs best" << std::setw(8) << "trials"
      << "  measured\n";
  const double best = r.order.empty() ? 0 : r.rate[r.order.front()];
  for (std::size_t i : r.order) {
    const LayoutTrials& l = result.layouts[i];
    out << (r.winner && *r.winner == i ? "* " : "  ") << std::left << std::setw(static_cast<int>(width))
        << layout_text(l.layout) << std::right;
    if (r.rate[i] <= 0) {
      std::string why = l.trials.empty() ? "not run" : l.trials.back().failure;
      out << "  failed: " << why << "\n";
      continue;
    }
    int good = 0, steps = 0;
    double seconds = 0;
    for (const auto& t : l.trials) {
      if (!t.ok) continue;
      ++good;
      steps += t.steps;
      seconds += t.seconds;
    }
    out << std::fixed << std::setprecision(1) << std::setw(14) << r.rate[i] << std::setprecision(3) << std::setw(9)
        << (best > 0 ? r.rate[i] / best : 0) << std::setw(8) << good << "  ";
    if (result.unit == RateUnit::kMetric || result.unit == RateUnit::kRankMetric)
      out << steps << " values";
    else
      out << steps << " steps in " << seconds_text(seconds);
    out << ", noise " << std::setprecision(1) << r.noise[i] * 100 << " %\n";
  }
  if (!r.tie.empty()) out << "  (" << r.tie << ")\n";
  return out.str();
}

TuneEntry tune_entry_of(const TuneResult& result, const std::string& fingerprint,
                        const std::vector<std::string>& program) {
  TuneEntry e;
  e.fingerprint = fingerprint;
  e.program = program;
  const std::size_t w = result.ranking.winner.value_or(0);
  e.layout = result.layouts.at(w).layout;
  e.rate = result.ranking.rate.at(w);
  e.unit = rate_unit_name(result.unit);
  double one_rank = 0;  // the best layout of one rank (any allocator)
  for (std::size_t i = 0; i < result.layouts.size(); ++i)
    if (result.layouts[i].layout.ranks == 1) one_rank = std::max(one_rank, result.ranking.rate[i]);
  if (one_rank > 0) e.ratio_to_one = e.rate / one_rank;
  e.tuned_at = utc_now();
  e.candidates = static_cast<int>(result.layouts.size());
  return e;
}

}  // namespace nano
