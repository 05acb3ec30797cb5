#include "runtime/in_program_launch.h"

#include <string.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>

#include "cli/launcher.h"

namespace nano {

namespace {
std::string signal_text(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev ? "SIG" + std::string(abbrev) : "signal " + std::to_string(signal);
}

std::string failure_line(int rank, const std::string& host, int exit_code, int signal) {
  if (rank < 0 && exit_code > 128 && exit_code < 160) {
    return "nano: the launch was stopped by " + signal_text(exit_code - 128) + " (exit code " +
           std::to_string(exit_code) + ")";
  }
  if (rank < 0) {
    return "nano: mpirun failed with code " + std::to_string(exit_code) + " before any rank did";
  }
  std::string who = "rank " + std::to_string(rank);
  if (!host.empty()) who += " (host " + host + ")";
  if (signal != 0) return "nano: " + who + " was killed by " + signal_text(signal);
  return "nano: " + who + " exited with code " + std::to_string(exit_code);
}
}  // namespace

RankFailedError::RankFailedError(int rank, std::string host, int exit_code, int signal,
                                 std::string stderr_tail, int launch_exit_code)
    : Error(failure_line(rank, host, exit_code, signal)),
      rank_(rank),
      host_(std::move(host)),
      exit_code_(exit_code),
      signal_(signal),
      stderr_tail_(std::move(stderr_tail)),
      launch_exit_code_(launch_exit_code) {}

namespace in_program {

std::string cpu_lists_to_string(const std::vector<std::vector<int>>& lists) {
  std::string out;
  for (std::size_t r = 0; r < lists.size(); ++r) {
    if (lists[r].empty()) {
      throw UsageError("nano: cpu_for_each_process: the list of rank " + std::to_string(r) +
                       " is empty");
    }
    if (r) out += ';';
    for (std::size_t i = 0; i < lists[r].size(); ++i) {
      if (lists[r][i] < 0) {
        throw UsageError("nano: cpu_for_each_process: bad CPU " + std::to_string(lists[r][i]) +
                         " for rank " + std::to_string(r));
      }
      if (i) out += ',';
      out += std::to_string(lists[r][i]);
    }
  }
  return out;
}

void check_self_launch(const SelfLaunch& l) {
  if (l.num_processes < 1) {
    throw UsageError("nano: num_processes must be at least 1, got " +
                     std::to_string(l.num_processes));
  }
  if (l.distributed_backend == "fork") {
    throw UsageError(
        "nano: distributed_backend \"fork\" is not supported (forking after libtorch has "
        "started its thread pools is unsafe); use \"subprocess\" or \"mpi\"");
  }
  if (l.distributed_backend != "subprocess" && l.distributed_backend != "mpi") {
    throw UsageError("nano: unknown distributed_backend \"" + l.distributed_backend +
                     "\": expected \"subprocess\" or \"mpi\"");
  }
  if (!l.cpu_for_each_process.empty() &&
      static_cast<int>(l.cpu_for_each_process.size()) != l.num_processes) {
    throw UsageError("nano: cpu_for_each_process has " +
                     std::to_string(l.cpu_for_each_process.size()) + " lists for " +
                     std::to_string(l.num_processes) + " processes");
  }
  cpu_lists_to_string(l.cpu_for_each_process);
  if ((!l.hostfile.empty() || !l.hosts.empty()) && l.distributed_backend != "mpi") {
    throw UsageError("nano: hostfile/hosts need distributed_backend \"mpi\", got \"" +
                     l.distributed_backend + "\"");
  }
  if (l.grace_period_ms < 0) {
    throw UsageError("nano: grace_period_ms must be >= 0, got " + std::to_string(l.grace_period_ms));
  }
  if (l.max_restarts < 0) {
    throw UsageError("nano: max_restarts must be >= 0, got " + std::to_string(l.max_restarts));
  }
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
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0 || argv.empty()) throw Error("nano: cannot read this program's command line from /proc/self");
  argv[0] = std::string(buf, static_cast<std::size_t>(n));
  return argv;
}

void launch_self(const SelfLaunch& l) {
  check_self_launch(l);
  LaunchOptions o;
  o.plan.num_processes = l.num_processes;
  o.plan.cpu_for_each_process = cpu_lists_to_string(l.cpu_for_each_process);
  o.plan.oversubscribe = l.oversubscribe;
  o.backend = l.distributed_backend == "mpi" ? Backend::mpi : Backend::subprocess;
  o.hostfile = l.hostfile;
  o.hosts = l.hosts;
  o.log_dir = l.log_dir;
  o.grace_period = std::chrono::milliseconds(l.grace_period_ms);
  o.max_restarts = l.max_restarts;
  o.extra_env = l.extra_env;
  LaunchResult r = launch(o, self_argv());
  if (r.exit_code == 0) return;
  if (r.failure) {
    throw RankFailedError(r.failure->rank, r.failure->host, r.failure->exit_code,
                          r.failure->signal, r.failure->stderr_tail, r.exit_code);
  }
  throw RankFailedError(-1, "", r.exit_code, 0, "", r.exit_code);
}

}  // namespace in_program
}  // namespace nano
