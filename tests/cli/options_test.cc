#include "cli/options.h"

#include <doctest/doctest.h>

#include <nano/error.h>
#include "core/setting_list.h"
#include "launcher/prepare/carried_env.h"

using namespace nano;

namespace {
RunCommand parse(std::vector<std::string> args) { return parse_run_command(args); }

// The message nano-run's main prints for what parsing `args` throws ("" when nothing).
std::string parse_error(std::vector<std::string> args) {
  try {
    parse_run_command(args);
  } catch (const UsageError& e) {
    return worded(e, command_line_flag);
  }
  return "";
}

// nano-run's arguments that give `flag` a value other than its default, and that value in
// `expected`, by the type of its LaunchOptions field.
std::vector<std::string> typed(const char* flag, bool& expected) {
  expected = true;
  return {flag};
}
std::vector<std::string> typed(const char* flag, std::string& expected) {
  expected = "given/value";
  return {flag, expected};
}
std::vector<std::string> typed(const char* flag, int& expected) {
  expected = 7;
  return {flag, "7"};
}
std::vector<std::string> typed(const char* flag, std::chrono::milliseconds& expected) {
  expected = std::chrono::milliseconds(2500);
  return {flag, "2.5"};
}
}  // namespace

TEST_CASE("every setting of core/setting_list.h is a flag of nano-run, parsed by its field's type") {
  int rows = 0;
#define NANO_CHECK_FLAG(id, key, flag, field, member, metavar, docs, help)                 \
  {                                                                                        \
    CAPTURE(flag);                                                                         \
    LaunchOptions expected;                                                                \
    std::vector<std::string> args = typed(flag, expected.member);                          \
    CHECK_FALSE(expected.member == LaunchOptions{}.member); /* the sample is no default */ \
    args.push_back("./train");                                                             \
    CHECK(parse(args).launch.member == expected.member);                                   \
    CHECK(parse({"./train"}).launch.member == LaunchOptions{}.member);                     \
    CHECK(parse({"--help"}).text.find(flag) != std::string::npos);                         \
    ++rows;                                                                                \
  }
  NANO_SHARED_SETTINGS(NANO_CHECK_FLAG)
#undef NANO_CHECK_FLAG
  CHECK(rows == static_cast<int>(std::size(kSharedSettingFields)));
  // A bad number or duration is nano's one line, naming the flag.
  CHECK(parse_error({"--max-restarts", "-1", "./train"}) ==
        "invalid value '-1' for --max-restarts: expected a whole number >= 0");
  CHECK(parse_error({"--heartbeat-timeout", "soon", "./train"}) ==
        "invalid value 'soon' for --heartbeat-timeout: expected seconds >= 0");
}

TEST_CASE("options fill LaunchOptions; the program and its options stay untouched") {
  RunCommand c = parse({"-n",
                        "4",
                        "--cores-per-process",
                        "2",
                        "--use-logical-cores",
                        "--oversubscribe",
                        "--synthetic",
                        "pack:1 core:8",
                        "--allocator",
                        "system",
                        "--disable-openmp",
                        "--threads",
                        "3",
                        "--backend",
                        "subprocess",
                        "--master-addr",
                        "10.0.0.1",
                        "--master-port",
                        "29500",
                        "--log-dir",
                        "logs",
                        "--output-ranks",
                        "0,2-3",
                        "--no-tag-output",
                        "--grace-period",
                        "1.5",
                        "./train",
                        "-n",
                        "7",
                        "--lr",
                        "0.1"});
  CHECK(c.kind == RunCommand::kRun);
  const LaunchOptions& o = c.launch;
  CHECK(o.plan.num_processes == 4);
  CHECK(o.plan.cores_per_process == 2);
  CHECK(o.plan.use_logical_cores);
  CHECK(o.plan.oversubscribe);
  CHECK(o.synthetic == "pack:1 core:8");
  CHECK(o.recipe.allocator == Allocator::kSystem);
  CHECK(o.recipe.disable_openmp);
  CHECK(o.recipe.threads == 3);
  CHECK(o.backend == LaunchBackend::kSubprocess);
  CHECK(o.master_addr == "10.0.0.1");
  CHECK(o.master_port == 29500);
  CHECK(o.log_dir == "logs");
  CHECK(o.output_ranks == std::vector<int>{0, 2, 3});
  CHECK_FALSE(o.tag_output);
  CHECK(o.grace_period.count() == 1500);
  CHECK(c.argv == std::vector<std::string>{"./train", "-n", "7", "--lr", "0.1"});
}

TEST_CASE("defaults and the -- separator") {
  RunCommand c = parse({"--", "--weird-program", "x"});
  CHECK(c.argv == std::vector<std::string>{"--weird-program", "x"});
  CHECK(c.launch.plan.num_processes == 0);
  CHECK(c.launch.backend == LaunchBackend::kAutomatic);
  CHECK(c.launch.tag_output);
  CHECK(c.launch.grace_period.count() == 5000);
  CHECK(c.launch.master_port == 0);
  CHECK_FALSE(c.dry_run);
}

TEST_CASE("help and version") {
  RunCommand h = parse({"--help"});
  CHECK(h.kind == RunCommand::kHelp);
  CHECK(h.text.find("Examples:") != std::string::npos);
  CHECK(h.text.find("--num-processes") != std::string::npos);
  CHECK(h.text.find("--nano-rank-shim") == std::string::npos);
  RunCommand v = parse({"--version"});
  CHECK(v.kind == RunCommand::kVersion);
  CHECK(v.text == "nano-run " NANO_VERSION);
  // Numbers show as numbers in the help, not as TEXT.
  CHECK(h.text.find("-n,--num-processes INT") != std::string::npos);
  CHECK(h.text.find("--grace-period SECONDS") != std::string::npos);
}

TEST_CASE("every bad option value: one line naming it") {
  struct Row {
    std::vector<std::string> args;
    const char* message;
  } rows[] = {
      {{"-n", "abc", "p"}, "invalid value 'abc' for --num-processes: expected a positive integer"},
      {{"-n", "0", "p"}, "--num-processes must be at least 1, got 0"},
      {{"-n", "-3", "p"}, "--num-processes must be at least 1, got -3"},
      {{"-n", "2.5", "p"}, "invalid value '2.5' for --num-processes: expected a positive integer"},
      {{"--cores-per-process", "0", "p"}, "invalid value '0' for --cores-per-process: expected a positive integer"},
      {{"--threads", "x", "p"}, "invalid value 'x' for --threads: expected a positive integer"},
      {{"--backend", "slurm", "p"}, "invalid value 'slurm' for --backend: expected mpi or subprocess"},
      {{"--master-port", "70000", "p"}, "invalid value '70000' for --master-port: expected a port number 1-65535"},
      {{"--master-port", "0", "p"}, "invalid value '0' for --master-port: expected a port number 1-65535"},
      {{"--grace-period", "-1", "p"}, "invalid value '-1' for --grace-period: expected seconds >= 0"},
      {{"--heartbeat-timeout", "1e3", "p"}, "invalid value '1e3' for --heartbeat-timeout: expected seconds >= 0"},
      {{"--max-restarts", "-1", "p"}, "invalid value '-1' for --max-restarts: expected a whole number >= 0"},
      {{"--cpu-for-each-process", "0;x", "p"}, "--cpu-for-each-process: malformed CPU list \"x\""},
      {{"--env", "1X=2", "p"},
       "invalid value '1X=2' for --env: expected NAME or NAME=VALUE with NAME made of letters, digits and _"},
      {{"--grace-period", "soon", "p"}, "invalid value 'soon' for --grace-period: expected seconds >= 0"},
      {{"--output-ranks", "a", "p"}, "invalid value 'a' for --output-ranks: expected rank numbers like 0,2-3"},
      {{"--allocator", "foo", "p"}, "unknown allocator \"foo\" (choose jemalloc, tcmalloc, system or auto)"},
      {{"--frobnicate", "p"}, "unknown option --frobnicate; nano-run --help lists them"},
      {{"-n", "2"}, "missing PROGRAM (usage: nano-run [options] [--] PROGRAM [ARGS...])"},
      {{"--num-processes"}, "--num-processes: 1 required INT|auto missing"},
      {{"--json", "p"}, "--json needs --dry-run"},
  };
  for (const auto& row : rows) {
    CAPTURE(row.message);
    CHECK(parse_error(row.args) == row.message);
  }
  // What the values mean together is the launcher's to check, once (check_launch_options).
  CHECK(parse_error({"--topology", "a.xml", "--synthetic", "core:2", "p"}).empty());
}

TEST_CASE("carried environment: the launching host's configuration, not its host-specific variables") {
  const nano::Environment here = {{"PATH", "/opt/bin:/usr/bin"},
                                  {"HOME", "/root"},
                                  {"HOSTNAME", "a"},
                                  {"OMP_SCHEDULE", "static"},
                                  {"NANO_BACKEND", "gloo"},
                                  {"NANO_CPUS", "0-3"},
                                  {"KMP_BLOCKTIME", "1"},
                                  {"MALLOC_CONF", "background_thread:true"},
                                  {"TORCH_SHOW_CPP_STACKTRACES", "1"},
                                  {"PWD", "/work"},
                                  {"MY_FLAG", "x"},
                                  {"NANO_JOB_SECRET", "s1"},
                                  {"NANO_PYTHON_KEY", "k1"},
                                  {"OMPI_MCA_btl", "^tcp"}};
  const auto carried = nano::carried_environment(
      here, {{"MY_FLAG", "y"}, {"EXTRA", "1"}, {"NANO_PYTHON_KEY", "k2"}, {"NANO_JOB_SECRET", "s2"}});
  const std::map<std::string, std::string> expected = {{"PATH", "/opt/bin:/usr/bin"},
                                                       {"OMP_SCHEDULE", "static"},
                                                       {"NANO_BACKEND", "gloo"},
                                                       {"KMP_BLOCKTIME", "1"},
                                                       {"MALLOC_CONF", "background_thread:true"},
                                                       {"TORCH_SHOW_CPP_STACKTRACES", "1"},
                                                       {"MY_FLAG", "y"},
                                                       {"EXTRA", "1"}};
  CHECK(carried == expected);  // no secret: the spec is a command line on every host
}

TEST_CASE("carried secrets: through mpirun's environment under their own names, back as theirs in the shim") {
  // The job's secret is the attempt's (its own variable); a Python launch's key travels as OMPI_*.
  const auto secrets = nano::carried_secrets({{"NANO_PYTHON_KEY", "k2"}, {"NANO_JOB_SECRET", "s2"}, {"A", "1"}});
  CHECK(secrets == std::map<std::string, std::string>{{"OMPI_NANO_SECRET_NANO_PYTHON_KEY", "k2"}});
  // A shim's environment: the carried one back under its name; one that is no secret's stays unset.
  const nano::Environment shim = {{"OMPI_NANO_SECRET_NANO_PYTHON_KEY", "k2"},
                                  {"OMPI_NANO_SECRET_LD_PRELOAD", "/tmp/evil.so"},
                                  {"OMPI_COMM_WORLD_RANK", "1"},
                                  {"PATH", "/usr/bin"}};
  CHECK(nano::restored_secrets(shim) ==
        nano::Environment{{"NANO_PYTHON_KEY", "k2"}, {"OMPI_COMM_WORLD_RANK", "1"}, {"PATH", "/usr/bin"}});
}

TEST_CASE("--env NAME[=VALUE]: set, carried from here, or a one-line error") {
  const nano::Environment here = {{"FOO", "1"}};
  CHECK(nano::parse_env_option("BAR=a=b", here) == std::pair<std::string, std::string>{"BAR", "a=b"});
  CHECK(nano::parse_env_option("FOO", here) == std::pair<std::string, std::string>{"FOO", "1"});
  CHECK(nano::parse_env_option("EMPTY=", here) == std::pair<std::string, std::string>{"EMPTY", ""});
  CHECK(parse_error({"--env", "MISSING", "p"}) == "--env MISSING: MISSING is not set in nano-run's environment");
  CHECK_THROWS_AS(nano::parse_env_option("1X=2", here), nano::SettingError);
  auto cmd = nano::parse_run_command({"--env", "A=1", "--env", "B=2", "./train"});
  CHECK(cmd.launch.extra_env == std::map<std::string, std::string>{{"A", "1"}, {"B", "2"}});
}

TEST_CASE("the tuning's flags: --tune, -n auto and their settings") {
  RunCommand c = parse({"--tune", "--tune-steps", "12", "--tune-candidates", "1,2,4", "--tune-allocators",
                        "jemalloc,default", "--tune-metric", "rate ([0-9.]+)", "--max-ranks", "2", "./train", "--x"});
  CHECK(c.tune);
  CHECK_FALSE(c.auto_ranks);
  CHECK(c.tune_options.steps == 12);
  CHECK(c.tune_options.candidates.rank_counts == std::vector<int>{1, 2, 4});
  CHECK(c.tune_options.candidates.allocators == std::vector<Allocator>{Allocator::kJemalloc, Allocator::kSystem});
  CHECK(c.tune_options.candidates.max_ranks == 2);
  CHECK(c.tune_options.metric == "rate ([0-9.]+)");
  CHECK_FALSE(c.tune_options.metric_per_rank);
  CHECK(c.argv == std::vector<std::string>{"./train", "--x"});
  c = parse({"--tune", "--tune-metric-per-rank", "mine ([0-9.]+)", "./train"});
  CHECK(c.tune_options.metric == "mine ([0-9.]+)");
  CHECK(c.tune_options.metric_per_rank);
  c = parse({"-n", "auto", "--tune-seconds", "2.5", "./train"});
  CHECK(c.auto_ranks);
  CHECK(c.launch.plan.num_processes == 0);
  CHECK(c.tune_options.measure == std::chrono::milliseconds(2500));
  CHECK(parse({"./train"}).tune_options.measure == std::chrono::seconds(8));  // the default
  struct Row {
    std::vector<std::string> args;
    std::string message;
  };
  const Row rows[] = {
      {{"--tune", "--tune-seconds", "0", "p"},
       "invalid value '0' for --tune-seconds: expected seconds from 0.1 to 3600"},
      {{"--tune", "--tune-steps", "0", "p"}, "invalid value '0' for --tune-steps: expected a positive integer"},
      {{"--tune", "--max-ranks", "-1", "p"}, "invalid value '-1' for --max-ranks: expected a positive integer"},
      {{"--tune", "--tune-steps", "3", "--tune-seconds", "2", "p"}, "give --tune-seconds or --tune-steps, not both"},
      {{"--tune-candidates", "1,2", "p"}, "the tuning's flags need --tune or --num-processes auto"},
      {{"--tune-metric-per-rank", "x", "p"}, "the tuning's flags need --tune or --num-processes auto"},
      {{"--tune", "--tune-metric", "x", "--tune-metric-per-rank", "y", "p"},
       "give --tune-metric (the whole job's figure) or --tune-metric-per-rank (each rank's), not both"},
      {{"-n", "autox", "p"}, "invalid value 'autox' for --num-processes: expected a positive integer"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.message);
    CHECK(parse_error(row.args) == row.message);
  }
}
