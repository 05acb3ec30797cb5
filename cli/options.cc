#include "cli/options.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <map>
#include <type_traits>

#include <nano/error.h>
#include "core/cpulist.h"
#include "core/parse.h"
#include "core/planner.h"
#include "core/setting.h"
#include "core/setting_list.h"
#include "launcher/prepare/carried_env.h"

namespace nano {
namespace {

constexpr const char* kUsage = "nano-run [options] [--] PROGRAM [ARGS...]";

constexpr const char* kExamples = R"(Examples:
  nano-run -n 4 ./train --epochs 3          4 pinned ranks, each on its own cores
  nano-run -n 2 /usr/bin/python3 prog.py    a stock PyTorch program (torchrun's env contract)
  nano-run -n 2 --cpu-for-each-process "0-3;4-7" ./train
  nano-run --cores-per-process 8 ./train    as many ranks as 8-core groups fit
  nano-run -n 8 --hosts node1:4,node2:4 ./train      two machines through Open MPI
  nano-run -n 4 --dry-run --json ./train    print the plan, start nothing
  nano-run -n 2 --synthetic "pack:2 core:8 pu:2" --dry-run ./train
  nano-run --tune ./train                   time ./train at each layout, store the fastest
  nano-run -n auto ./train                  run the stored fastest layout (tune first if none)
Exit codes: 0 every rank succeeded; the failing rank's code; 128+signal when a rank was
killed; 130 on Ctrl-C; 2 bad input (nothing started).
One host: the ranks are nano-run's own processes (--backend subprocess) unless --backend mpi.
Docs (in nano's source, installed in share/doc/nano):
  docs/nano-run.md          every option, the output, what a job listens on
  docs/tuning.md            how cores are split, --tune and -n auto
  docs/multihost.md         several machines, Slurm
  docs/failures.md          failures, restarts, checkpoints
  docs/torch-backend.md     stock PyTorch programs on the nano backend
  docs/troubleshooting.md   when a run fails or is slow)";

std::string flag(Setting setting) { return command_line_flag(setting); }

// "invalid value 'TEXT' for {setting}: expected ..."
SettingError invalid(Setting setting, const std::string& text, const std::string& expected) {
  return SettingError(setting, text,
                      "invalid value '" + text + "' for {" + setting_key(setting) + "}: expected " + expected);
}

int parse_int(Setting setting, const std::string& text, int min, int max, const std::string& expected) {
  const std::optional<long long> value = parse_integer(text, min, max);
  if (!value) throw invalid(setting, text, expected);
  return static_cast<int>(*value);
}

std::chrono::milliseconds parse_duration(Setting setting, const std::string& text) {
  const auto value = parse_seconds(text, std::chrono::milliseconds(0), std::chrono::hours(24));
  if (!value) throw invalid(setting, text, "seconds >= 0");
  return *value;
}

std::vector<int> parse_rank_list(Setting setting, const std::string& text) {
  try {
    return parse_cpu_list(text);
  } catch (const UsageError&) {
    throw invalid(setting, text, "rank numbers like 0,2-3");
  }
}

// nano-run's flags as typed: numbers, lists and durations are read as text and parsed by
// apply_flags, so that each bad value gets nano's one-line error naming it.
struct TypedFlags {
  std::string num_processes, cpu_for_each_process, cores_per_process, threads, allocator, backend, master_port;
  std::string output_ranks;
  std::string tune_seconds, tune_steps, tune_candidates, tune_allocators, max_ranks, tune_metric_per_rank;
  std::vector<std::string> env;
  std::map<Setting, std::string> shared;  // the numbers and durations of core/setting_list.h's settings
  bool no_tag_output = false;
  bool version = false;
};

// Declares the flag of one setting every front end honours (core/setting_list.h), by the type of
// its LaunchOptions field: a bool is a switch and text is taken as typed; a number or a duration
// is read as text, for parse_shared.
template <class T>
void declare_shared(CLI::App& app, Setting setting, T& field, const char* metavar, const char* help, TypedFlags& raw) {
  if constexpr (std::is_same_v<T, bool>)
    app.add_flag(flag(setting), field, help);
  else if constexpr (std::is_same_v<T, std::string>)
    app.add_option(flag(setting), field, help)->type_name(metavar);
  else
    app.add_option(flag(setting), raw.shared[setting], help)->type_name(metavar);
}

// A number or duration of declare_shared's, given, into its field: a duration in seconds, a
// number a whole one >= 0 (each front end's launch checks finer bounds alike).
template <class T>
void parse_shared(Setting setting, const TypedFlags& raw, T& field) {
  const auto given = raw.shared.find(setting);
  if (given == raw.shared.end() || given->second.empty()) return;
  if constexpr (std::is_same_v<T, std::chrono::milliseconds>)
    field = parse_duration(setting, given->second);
  else if constexpr (std::is_same_v<T, int>)
    field = parse_int(setting, given->second, 0, 1000000, "a whole number >= 0");
  else
    static_assert(std::is_same_v<T, bool> || std::is_same_v<T, std::string>, "a shared setting of a new type");
}

// Declares every flag of nano-run on `app`: booleans and paths straight into `cmd`, the rest
// into `raw`.
void declare_flags(CLI::App& app, RunCommand& cmd, TypedFlags& raw) {
  app.add_option("-n," + flag(Setting::kNumProcesses), raw.num_processes,
                 "Number of ranks (default 1, or the hosts' slots); auto = the layout " + flag(Setting::kTune) +
                     " stored for this machine and program (tuned first when none is)")
      ->type_name("INT|auto");
  app.add_option(flag(Setting::kCpuForEachProcess), raw.cpu_for_each_process,
                 "Explicit CPU lists, one per rank: \"0-3;4-7\"")
      ->type_name("LISTS");
  app.add_option(flag(Setting::kCoresPerProcess), raw.cores_per_process,
                 "Physical cores per rank (N derived if not given)")
      ->type_name("INT");
  app.add_flag(flag(Setting::kUseLogicalCores), cmd.launch.plan.use_logical_cores, "Give ranks every SMT thread");
  app.add_flag(flag(Setting::kUseEfficiencyCores), cmd.launch.plan.use_efficiency_cores,
               "Also use efficiency cores of a hybrid CPU");
  app.add_option(flag(Setting::kTopology), cmd.launch.topology_xml, "Plan against an hwloc XML file")
      ->type_name("FILE");
  app.add_option(flag(Setting::kSynthetic), cmd.launch.synthetic, "Plan against an hwloc synthetic description");
  app.add_option(flag(Setting::kAllocator), raw.allocator,
                 "jemalloc|tcmalloc|system (default: jemalloc when installed)");
  app.add_flag(flag(Setting::kDisableOpenMp), cmd.launch.recipe.disable_openmp, "Set no OpenMP variables");
  app.add_option(flag(Setting::kThreads), raw.threads, "OMP_NUM_THREADS of every rank (default: its cores)")
      ->type_name("INT");
  app.add_option(flag(Setting::kBackend), raw.backend,
                 "mpi|subprocess (default: subprocess on one host, mpi across hosts)");
  app.add_option(flag(Setting::kMasterAddr), cmd.launch.master_addr,
                 "MASTER_ADDR (default 127.0.0.1 or the first host)");
  app.add_option(flag(Setting::kMasterPort), raw.master_port, "MASTER_PORT (default: a free port)")->type_name("INT");
  app.add_option(flag(Setting::kEnv), raw.env,
                 "NAME=VALUE, or NAME for its value here: set it for every rank on every host "
                 "(repeatable; PATH, LD_LIBRARY_PATH, PYTHONPATH, MALLOC_CONF and NANO_*, OMP_*, KMP_*, "
                 "MKL_*, TORCH_*, GLOO_* ... travel to other hosts anyway)")
      ->allow_extra_args(false);
  app.add_option(flag(Setting::kOutputRanks), raw.output_ranks, "Show only these ranks' output: 0 or 0,2-3")
      ->type_name("RANKS");
  app.add_flag("--no-tag-output", raw.no_tag_output, "Do not prefix lines with [rank N]");
#define NANO_DECLARE_SHARED(id, key, flag, field, member, metavar, docs, help) \
  declare_shared(app, Setting::id, cmd.launch.member, metavar, help, raw);
  NANO_SHARED_SETTINGS(NANO_DECLARE_SHARED)
#undef NANO_DECLARE_SHARED
  app.add_flag(flag(Setting::kDryRun), cmd.dry_run, "Print the plan and each rank's environment; start nothing");
  app.add_flag(flag(Setting::kJson), cmd.json, "With " + flag(Setting::kDryRun) + ": print JSON");
  app.add_flag(flag(Setting::kTune), cmd.tune,
               "Run short trials of the program at candidate layouts (ranks x threads x allocator), print "
               "their throughput and store the fastest for -n auto");
  app.add_option(flag(Setting::kTuneSeconds), raw.tune_seconds,
                 "Each trial measures this long after 3 warm-up steps (default 8)")
      ->type_name("SECONDS");
  app.add_option(flag(Setting::kTuneSteps), raw.tune_steps, "Each trial measures this many steps instead")
      ->type_name("INT");
  app.add_option(flag(Setting::kTuneCandidates), raw.tune_candidates,
                 "Rank counts to try, e.g. 1,2,4 (default: those that split the cores evenly along "
                 "packages, NUMA nodes and L3 domains)")
      ->type_name("LIST");
  app.add_option(flag(Setting::kTuneAllocators), raw.tune_allocators,
                 "Also try these allocators: jemalloc,tcmalloc,default (default: " + flag(Setting::kAllocator) + "'s)")
      ->type_name("LIST");
  app.add_option(flag(Setting::kTuneMetric), cmd.tune_options.metric,
                 "Time the program by its own output instead: a regex whose first group on a line of rank 0 is "
                 "the whole job's throughput (needed for programs without nano's runtime)")
      ->type_name("REGEX");
  app.add_option(flag(Setting::kTuneMetricPerRank), raw.tune_metric_per_rank,
                 "As " + flag(Setting::kTuneMetric) +
                     ", for a program whose every rank prints its own throughput: the ranks' figures are summed")
      ->type_name("REGEX");
  app.add_option(flag(Setting::kMaxRanks), raw.max_ranks, "Try no layout of more ranks than this")->type_name("INT");
  app.add_flag("--version", raw.version, "Print the version and exit");
}

// The tuning's flags into `tune`.
void apply_tune_flags(const TypedFlags& raw, TuneOptions& tune) {
  if (!raw.tune_seconds.empty()) {
    const auto value = parse_seconds(raw.tune_seconds, std::chrono::milliseconds(100), std::chrono::hours(1));
    if (!value) throw invalid(Setting::kTuneSeconds, raw.tune_seconds, "seconds from 0.1 to 3600");
    tune.measure = *value;
  }
  if (!raw.tune_steps.empty())
    tune.steps = parse_int(Setting::kTuneSteps, raw.tune_steps, 1, 1000000, "a positive integer");
  if (!raw.tune_candidates.empty()) tune.candidates.rank_counts = parse_rank_counts(raw.tune_candidates);
  if (!raw.tune_allocators.empty()) tune.candidates.allocators = parse_allocator_list(raw.tune_allocators);
  if (!raw.max_ranks.empty())
    tune.candidates.max_ranks = parse_int(Setting::kMaxRanks, raw.max_ranks, 1, 1 << 20, "a positive integer");
  if (!raw.tune_metric_per_rank.empty()) {
    if (!tune.metric.empty())
      throw SettingError(Setting::kTuneMetricPerRank, raw.tune_metric_per_rank,
                         "give {tune_metric} (the whole job's figure) or {tune_metric_per_rank} (each rank's), "
                         "not both");
    tune.metric = raw.tune_metric_per_rank;
    tune.metric_per_rank = true;
  }
}

// The typed flags into `launch`, each parsed on its own; throws SettingError naming the flag.
void apply_flags(const TypedFlags& raw, LaunchOptions& launch) {
  const int kMaxRanks = 1 << 20;
  if (!raw.num_processes.empty() && raw.num_processes != "auto") {
    launch.plan.num_processes =
        parse_int(Setting::kNumProcesses, raw.num_processes, -kMaxRanks, kMaxRanks, "a positive integer");
    check_num_processes(launch.plan.num_processes);  // 0 means "not given" in PlanOptions
  }
  if (!raw.cpu_for_each_process.empty())
    launch.plan.cpu_for_each_process = parse_cpu_for_each_process(raw.cpu_for_each_process);
  if (!raw.cores_per_process.empty())
    launch.plan.cores_per_process =
        parse_int(Setting::kCoresPerProcess, raw.cores_per_process, 1, kMaxRanks, "a positive integer");
  if (!raw.threads.empty())
    launch.recipe.threads = parse_int(Setting::kThreads, raw.threads, 1, kMaxRanks, "a positive integer");
  if (!raw.allocator.empty()) launch.recipe.allocator = parse_allocator(raw.allocator);
  if (raw.backend == "mpi")
    launch.backend = LaunchBackend::kMpi;
  else if (raw.backend == "subprocess")
    launch.backend = LaunchBackend::kSubprocess;
  else if (!raw.backend.empty())
    throw invalid(Setting::kBackend, raw.backend, "mpi or subprocess");
  if (!raw.master_port.empty())
    launch.master_port = parse_int(Setting::kMasterPort, raw.master_port, 1, 65535, "a port number 1-65535");
#define NANO_PARSE_SHARED(id, key, flag, field, member, metavar, docs, help) \
  parse_shared(Setting::id, raw, launch.member);
  NANO_SHARED_SETTINGS(NANO_PARSE_SHARED)
#undef NANO_PARSE_SHARED
  if (!raw.output_ranks.empty()) launch.output_ranks = parse_rank_list(Setting::kOutputRanks, raw.output_ranks);
  launch.tag_output = !raw.no_tag_output;
  if (!raw.env.empty()) {
    const Environment here = current_environment();
    for (const auto& spec : raw.env) {
      auto [name, value] = parse_env_option(spec, here);
      launch.extra_env[name] = value;
    }
  }
}

}  // namespace

#ifndef NANO_VERSION
#define NANO_VERSION "unknown"
#endif

std::string version_text() { return std::string("nano-run ") + NANO_VERSION; }

RunCommand parse_run_command(const std::vector<std::string>& args) {
  RunCommand cmd;
  cmd.launch.front_end = FrontEnd::kCommandLine;
  CLI::App app("nano-run: start N pinned ranks of a program and supervise them", "nano-run");
  app.footer(std::string("Usage: ") + kUsage + "\n\n" + kExamples);
  app.prefix_command();
  app.set_help_flag("-h,--help", "Print this help and exit");
  TypedFlags raw;
  declare_flags(app, cmd, raw);

  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    cmd.kind = RunCommand::kHelp;
    cmd.text = app.help();
    return cmd;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    throw UsageError(what.empty() ? "bad arguments" : what);
  }
  if (raw.version) {
    cmd.kind = RunCommand::kVersion;
    cmd.text = version_text();
    return cmd;
  }
  cmd.argv = app.remaining();
  if (!cmd.argv.empty() && cmd.argv.front() == "--")
    cmd.argv.erase(cmd.argv.begin());
  else if (!cmd.argv.empty() && cmd.argv.front().size() > 1 && cmd.argv.front()[0] == '-')
    throw UsageError("unknown option " + cmd.argv.front() + "; nano-run --help lists them");
  if (cmd.argv.empty()) throw UsageError(std::string("missing PROGRAM (usage: ") + kUsage + ")");

  apply_flags(raw, cmd.launch);
  apply_tune_flags(raw, cmd.tune_options);
  cmd.auto_ranks = raw.num_processes == "auto";
  if (cmd.json && !cmd.dry_run) throw SettingError(Setting::kJson, "", "{json} needs {dry_run}");
  const bool tune_flags = !raw.tune_seconds.empty() || !raw.tune_steps.empty() || !raw.tune_candidates.empty() ||
                          !raw.tune_allocators.empty() || !raw.max_ranks.empty() || !cmd.tune_options.metric.empty();
  if (tune_flags && !cmd.tune && !cmd.auto_ranks)
    throw SettingError(Setting::kTune, "", "the tuning's flags need {tune} or {num_processes} auto");
  if (!raw.tune_seconds.empty() && !raw.tune_steps.empty())
    throw SettingError(Setting::kTuneSteps, raw.tune_steps, "give {tune_seconds} or {tune_steps}, not both");
  return cmd;
}

}  // namespace nano
