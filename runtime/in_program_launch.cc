#include "runtime/in_program_launch.h"

#include <fstream>
#include <iterator>
#include <sstream>

#include <iostream>

#include "launcher/launch/launcher.h"
#include "launcher/prepare/launch_setup.h"
#include "launcher/process/self_exe.h"
#include "launcher/process/signals.h"
#include "launcher/tune/auto_layout.h"

namespace nano {

namespace {
std::string failure_line(int rank, const std::string& host, int exit_code, int signal) {
  if (rank < 0 && exit_code > 128 && exit_code < 160) {
    return "nano: the launch was stopped by " + signal_name(exit_code - 128) + " (exit code " +
           std::to_string(exit_code) + ")";
  }
  if (rank < 0) {
    return "nano: mpirun failed with code " + std::to_string(exit_code) + " before any rank did";
  }
  std::string who = "rank " + std::to_string(rank);
  if (!host.empty()) who += " (host " + host + ")";
  if (signal != 0) return "nano: " + who + " was killed by " + signal_name(signal);
  return "nano: " + who + " exited with code " + std::to_string(exit_code);
}
}  // namespace

RankFailedError::RankFailedError(int rank, std::string host, int exit_code, int signal, std::string stderr_tail,
                                 int launch_exit_code)
    : Error(failure_line(rank, host, exit_code, signal)),
      rank_(rank),
      host_(std::move(host)),
      exit_code_(exit_code),
      signal_(signal),
      stderr_tail_(std::move(stderr_tail)),
      launch_exit_code_(launch_exit_code) {}

namespace in_program {

PreparedLaunch::PreparedLaunch(std::unique_ptr<Setup> setup, bool tune_first)
    : setup_(std::move(setup)), tune_first_(tune_first) {}
PreparedLaunch::PreparedLaunch(PreparedLaunch&&) noexcept = default;
PreparedLaunch& PreparedLaunch::operator=(PreparedLaunch&&) noexcept = default;
PreparedLaunch::~PreparedLaunch() = default;

PreparedLaunch prepare_self(const LaunchOptions& options, bool tune_first) {
  // A tuned launch plans each layout it tries and then the winner; until then only the checks.
  const Purpose purpose = tune_first ? Purpose::kDryRun : Purpose::kLaunch;
  return PreparedLaunch(std::make_unique<Setup>(prepare(options, self_argv(), purpose)), tune_first);
}

std::vector<std::string> split_cmdline(const std::string& bytes) {
  std::vector<std::string> argv;
  std::string cur;
  for (char c : bytes) {
    if (c == '\0') {
      argv.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) argv.push_back(cur);
  return argv;
}

std::vector<std::string> self_argv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv = split_cmdline(bytes);
  const std::string exe = self_executable();
  if (exe.empty() || argv.empty()) throw Error("nano: cannot read this program's command line from /proc/self");
  argv[0] = exe;
  return argv;
}

LaunchOptions with_tuned_layout(const LaunchOptions& o) {
  const std::vector<std::string> argv = self_argv();
  StoredLayout store = look_up_layout(o, argv);
  const auto say = [](const std::string& line) { std::cerr << line << std::endl; };
  if (!store.warning.empty()) say("nano: warning: " + store.warning);
  if (store.hit) {
    say("nano: num_processes = kAuto: " + stored_layout_text(*store.hit));
    return with_layout(o, store.hit->layout);
  }
  say("nano: num_processes = kAuto: nothing tuned for this program on this machine yet; tuning first");
  int interrupted_by = 0;
  const auto chosen = tune_and_store(o, TuneOptions{}, argv, store, say, &interrupted_by);
  if (interrupted_by) throw RankFailedError(-1, "", 128 + interrupted_by, 0, "", 128 + interrupted_by);
  if (!chosen) throw Error("nano: num_processes = kAuto: every layout failed in the tuning (see its table above)");
  return with_layout(o, chosen->layout);
}

void launch_self(PreparedLaunch prepared) {
  LaunchResult r = prepared.tune_first_ ? launch(with_tuned_layout(prepared.setup_->options), self_argv())
                                        : launch(std::move(*prepared.setup_));
  if (r.exit_code == 0) return;
  if (r.failure) {
    throw RankFailedError(r.failure->rank, r.failure->host, r.failure->exit_code, r.failure->signal,
                          r.failure->stderr_tail, r.exit_code);
  }
  throw RankFailedError(-1, "", r.exit_code, 0, "", r.exit_code);
}

}  // namespace in_program
}  // namespace nano
