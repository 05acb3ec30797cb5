#include "cli/options.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <sstream>

#include <nano/error.h>
#include "cli/carried_env.h"
#include "env-init/cpulist.h"
#include "env-init/parse.h"

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
Exit codes: 0 every rank succeeded; the failing rank's code; 128+signal when a rank was
killed; 130 on Ctrl-C; 2 bad input (nothing started).)";

int parse_int(const std::string& option, const std::string& text, int min, int max, const std::string& expected) {
  const std::optional<long long> value = parse_integer(text, min, max);
  if (!value) throw UsageError("invalid value '" + text + "' for " + option + ": expected " + expected);
  return static_cast<int>(*value);
}

double parse_seconds(const std::string& option, const std::string& text) {
  double value = -1;
  bool ok = !text.empty();
  if (ok) {
    std::istringstream in(text);
    in >> value;
    ok = !in.fail() && in.eof() && std::isfinite(value) && value >= 0 && value <= 86400;
  }
  if (!ok) throw UsageError("invalid value '" + text + "' for " + option + ": expected seconds >= 0");
  return value;
}

std::vector<int> parse_rank_list(const std::string& option, const std::string& text) {
  try {
    return parse_cpu_list(text);
  } catch (const UsageError&) {
    throw UsageError("invalid value '" + text + "' for " + option + ": expected rank numbers like 0,2-3");
  }
}

}  // namespace

std::string version_text() { return "nano-run 0.1.0"; }

std::string allocator_name(Allocator allocator) {
  switch (allocator) {
    case Allocator::kJemalloc: return "jemalloc";
    case Allocator::kTcmalloc: return "tcmalloc";
    case Allocator::kSystem: return "system";
    default: return "auto";
  }
}

RunCommand parse_run_command(const std::vector<std::string>& args) {
  RunCommand cmd;
  LaunchOptions& o = cmd.launch;
  CLI::App app("nano-run: start N pinned ranks of a program and supervise them", "nano-run");
  app.footer(std::string("Usage: ") + kUsage + "\n\n" + kExamples);
  app.prefix_command();
  app.set_help_flag("-h,--help", "Print this help and exit");

  std::string n, cores_per, threads, allocator, backend, master_port, grace, output_ranks;
  std::string group_starts, max_restarts, restart_delay, heartbeat, cpu_lists, shim_restart, shim_max_restarts;
  std::vector<std::string> env_specs, shim_env;
  bool version = false, no_tag = false;
  app.add_option("-n,--num-processes", n, "Number of ranks (default 1, or the hosts' slots)");
  app.add_option("--cpu-for-each-process", cpu_lists, "Explicit CPU lists, one per rank: \"0-3;4-7\"");
  app.add_option("--cores-per-process", cores_per, "Physical cores per rank (N derived if not given)");
  app.add_flag("--use-logical-cores", o.plan.use_logical_cores, "Give ranks every SMT thread");
  app.add_flag("--use-efficiency-cores", o.plan.use_efficiency_cores, "Also use efficiency cores of a hybrid CPU");
  app.add_flag("--oversubscribe", o.plan.oversubscribe, "Allow more ranks than cores");
  app.add_option("--topology", o.topology_xml, "Plan against an hwloc XML file");
  app.add_option("--synthetic", o.synthetic, "Plan against an hwloc synthetic description");
  app.add_option("--allocator", allocator, "jemalloc|tcmalloc|system (default: jemalloc when installed)");
  app.add_flag("--disable-openmp", o.recipe.disable_openmp, "Set no OpenMP variables");
  app.add_option("--threads", threads, "OMP_NUM_THREADS of every rank (default: its cores)");
  app.add_option("--backend", backend, "mpi|subprocess (default: mpi when mpirun is installed)");
  app.add_option("--hostfile", o.hostfile, "Open MPI hostfile (mpi backend)");
  app.add_option("--hosts", o.hosts, "host:slots,... (mpi backend)");
  app.add_option("--master-addr", o.master_addr, "MASTER_ADDR (default 127.0.0.1 or the first host)");
  app.add_option("--master-port", master_port, "MASTER_PORT (default: a free port)");
  app.add_option("--env", env_specs,
                 "NAME=VALUE, or NAME for its value here: set it for every rank on every host "
                 "(repeatable; PATH, LD_LIBRARY_PATH, PYTHONPATH, MALLOC_CONF and NANO_*, OMP_*, KMP_*, "
                 "MKL_*, TORCH_*, GLOO_* ... travel to other hosts anyway)")
      ->allow_extra_args(false);
  app.add_option("--log-dir", o.log_dir, "Write rank-N.log per rank and summary.log here");
  app.add_option("--output-ranks", output_ranks, "Show only these ranks' output: 0 or 0,2-3");
  app.add_flag("--no-tag-output", no_tag, "Do not prefix lines with [rank N]");
  app.add_option("--grace-period", grace, "Seconds between SIGTERM and SIGKILL at teardown (default 5)");
  app.add_option("--heartbeat-timeout", heartbeat,
                 "mpi backend: seconds without word from a rank's host before it counts as lost (default 30)");
  app.add_option("--max-restarts", max_restarts,
                 "Start the whole world again after a rank fails, at most N times (default 0)");
  app.add_option("--restart-delay", restart_delay, "Seconds to wait before a restart (default 1)");
  app.add_flag("--dry-run", cmd.dry_run, "Print the plan and each rank's environment; start nothing");
  app.add_flag("--json", cmd.json, "With --dry-run: print JSON");
  app.add_flag("--version", version, "Print the version and exit");
  app.add_flag(kRankShimFlag, cmd.rank_shim)->group("");
  app.add_option("--nano-launcher", cmd.link.launcher)->group("");
  app.add_option("--nano-token", cmd.link.token)->group("");
  app.add_option("--nano-group-starts", group_starts)->group("");
  app.add_option("--nano-env", shim_env)->group("")->allow_extra_args(false);
  app.add_option("--nano-job-id", cmd.link.attempt.job_id)->group("");
  app.add_option("--nano-run-id", cmd.link.attempt.run_id)->group("");
  app.add_option("--nano-restart-count", shim_restart)->group("");
  app.add_option("--nano-max-restarts", shim_max_restarts)->group("");

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
  if (version) {
    cmd.kind = RunCommand::kVersion;
    cmd.text = version_text();
    return cmd;
  }
  cmd.argv = app.remaining();
  if (!cmd.argv.empty() && cmd.argv.front() == "--")
    cmd.argv.erase(cmd.argv.begin());
  else if (!cmd.argv.empty() && cmd.argv.front().size() > 1 && cmd.argv.front()[0] == '-')
    throw UsageError("unknown option " + cmd.argv.front() + " (see nano-run --help)");
  if (cmd.argv.empty()) throw UsageError(std::string("missing PROGRAM (usage: ") + kUsage + ")");

  const int kMaxRanks = 1 << 20;
  if (!n.empty()) {
    o.plan.num_processes = parse_int("--num-processes", n, -kMaxRanks, kMaxRanks, "a positive integer");
    check_num_processes(o.plan.num_processes, "--num-processes");
  }
  o.plan.names = plan_flag_names();
  o.names = launch_flag_names();
  if (!cpu_lists.empty()) {
    try {
      o.plan.cpu_for_each_process = parse_cpu_lists(cpu_lists);
    } catch (const UsageError& e) {
      throw UsageError(std::string("--cpu-for-each-process: ") + e.what());
    }
  }
  if (!cores_per.empty())
    o.plan.cores_per_process = parse_int("--cores-per-process", cores_per, 1, kMaxRanks, "a positive integer");
  if (!threads.empty()) o.recipe.threads = parse_int("--threads", threads, 1, kMaxRanks, "a positive integer");
  if (!allocator.empty()) o.recipe.allocator = parse_allocator(allocator);
  if (backend == "mpi")
    o.backend = LaunchBackend::kMpi;
  else if (backend == "subprocess")
    o.backend = LaunchBackend::kSubprocess;
  else if (!backend.empty())
    throw UsageError("invalid value '" + backend + "' for --backend: expected mpi or subprocess");
  if (!master_port.empty()) o.master_port = parse_int("--master-port", master_port, 1, 65535, "a port number 1-65535");
  if (!grace.empty())
    o.grace_period =
        std::chrono::milliseconds(static_cast<long long>(std::llround(parse_seconds("--grace-period", grace) * 1000)));
  if (!heartbeat.empty()) {
    const double seconds = parse_seconds("--heartbeat-timeout", heartbeat);
    if (seconds < 1)
      throw UsageError("invalid value '" + heartbeat + "' for --heartbeat-timeout: expected seconds >= 1");
    o.heartbeat_timeout = std::chrono::milliseconds(static_cast<long long>(std::llround(seconds * 1000)));
  }
  if (!max_restarts.empty())
    o.max_restarts = parse_int("--max-restarts", max_restarts, 0, 1000000, "a whole number >= 0");
  if (!restart_delay.empty())
    o.restart_delay = std::chrono::milliseconds(
        static_cast<long long>(std::llround(parse_seconds("--restart-delay", restart_delay) * 1000)));
  if (!output_ranks.empty()) o.output_ranks = parse_rank_list("--output-ranks", output_ranks);
  o.tag_output = !no_tag;
  if (!group_starts.empty()) cmd.link.group_starts = parse_rank_list("--nano-group-starts", group_starts);
  if (cmd.link.group_starts.empty()) cmd.link.group_starts = {0};
  if (!env_specs.empty()) {
    const Environment here = current_environment();
    for (const auto& spec : env_specs) {
      auto [name, value] = parse_env_option(spec, here);
      o.extra_env[name] = value;
    }
  }
  if (!shim_restart.empty())
    cmd.link.attempt.restart_count = parse_int("--nano-restart-count", shim_restart, 0, 1000000, "a whole number >= 0");
  if (!shim_max_restarts.empty())
    cmd.link.attempt.max_restarts =
        parse_int("--nano-max-restarts", shim_max_restarts, 0, 1000000, "a whole number >= 0");
  for (const auto& assignment : shim_env) {
    const auto eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("invalid value '" + assignment + "' for --nano-env");
    cmd.link.env[assignment.substr(0, eq)] = assignment.substr(eq + 1);
  }

  if (!o.topology_xml.empty() && !o.synthetic.empty())
    throw UsageError("--topology and --synthetic cannot be used together");
  if (!o.hosts.empty() && !o.hostfile.empty()) throw UsageError("--hosts and --hostfile cannot be used together");
  if (cmd.json && !cmd.dry_run) throw UsageError("--json needs --dry-run");
  return cmd;
}

std::vector<std::string> shim_arguments(const LaunchOptions& o, const ShimLink& link) {
  std::vector<std::string> a = {kRankShimFlag};
  auto add = [&](const std::string& name, const std::string& value) {
    if (value.empty()) return;
    a.push_back(name);
    a.push_back(value);
  };
  add("--cpu-for-each-process", format_cpu_lists(o.plan.cpu_for_each_process));
  if (o.plan.cores_per_process > 0) add("--cores-per-process", std::to_string(o.plan.cores_per_process));
  if (o.plan.use_logical_cores) a.push_back("--use-logical-cores");
  if (o.plan.use_efficiency_cores) a.push_back("--use-efficiency-cores");
  if (o.plan.oversubscribe) a.push_back("--oversubscribe");
  add("--topology", o.topology_xml);
  add("--synthetic", o.synthetic);
  if (o.recipe.allocator != Allocator::kAutomatic) add("--allocator", allocator_name(o.recipe.allocator));
  if (o.recipe.disable_openmp) a.push_back("--disable-openmp");
  if (o.recipe.threads > 0) add("--threads", std::to_string(o.recipe.threads));
  add("--heartbeat-timeout", std::to_string(o.heartbeat_timeout.count() / 1000.0));
  add("--master-addr", o.master_addr);
  if (o.master_port > 0) add("--master-port", std::to_string(o.master_port));
  add("--nano-launcher", link.launcher);
  add("--nano-token", link.token);
  std::vector<int> starts = link.group_starts;
  if (starts.empty()) starts = {0};
  add("--nano-group-starts", format_cpu_list(starts));
  for (const auto& [name, value] : link.env) add("--nano-env", name + "=" + value);
  if (!link.attempt.job_id.empty()) {
    add("--nano-job-id", link.attempt.job_id);
    add("--nano-run-id", link.attempt.run_id);
    add("--nano-restart-count", std::to_string(link.attempt.restart_count));
    add("--nano-max-restarts", std::to_string(link.attempt.max_restarts));
  }
  return a;
}

}  // namespace nano
