#pragma once
// Helpers of nano-run's integration tests (nano_run_test.cc, nano_run_restarts_test.cc; test code
// only): the real nano-run started with its output in files, waited for within a bound, and the
// pid files its rank_probe ranks write.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include "tests/common/process_checks.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace nano::test::cli {

using Clock = std::chrono::steady_clock;

/// The nano-run binary under test and the rank program that reports what it was given.
inline const std::string kNanoRun = NANO_RUN_PATH;
inline const std::string kProbe = RANK_PROBE_PATH;

/// Every case runs once per backend.
inline const char* const kBackends[] = {"subprocess", "mpi"};

/// A nano-run started by start(): its pid, the folder holding its stdout and stderr, its start.
struct Proc {
  pid_t pid = -1;
  std::string dir;
  Clock::time_point started;
};

/// How a nano-run ended: exit code (128 + signal when killed), its output, how long it took.
struct Result {
  int rc = -1;
  std::string out, err;
  double seconds = 0;
};

/// Starts `nano_run` with `args`, `env_add` ("NAME=VALUE") added to the environment.
inline Proc start(const std::vector<std::string>& args, const std::vector<std::string>& env_add = {},
                  const std::string& nano_run = kNanoRun) {
  Proc p;
  p.dir = temp_dir("nano_run_test");
  p.started = Clock::now();
  p.pid = fork();
  if (p.pid == 0) {
    int out = open((p.dir + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open((p.dir + "/err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    for (const auto& e : env_add) putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv = {const_cast<char*>(nano_run.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(126);
  }
  return p;
}

/// Waits for `p` (SIGKILL and a failed test after `timeout_s`) and removes its folder.
inline Result wait_for(const Proc& p, double timeout_s = 60) {
  Result r;
  int status = 0;
  auto until = p.started + std::chrono::duration<double>(timeout_s);
  for (;;) {
    pid_t got = waitpid(p.pid, &status, WNOHANG);
    if (got == p.pid) break;
    if (Clock::now() > until) {
      kill(p.pid, SIGKILL);
      waitpid(p.pid, &status, 0);
      FAIL("nano-run did not finish in time");
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  r.seconds = std::chrono::duration<double>(Clock::now() - p.started).count();
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(p.dir + "/out");
  r.err = slurp(p.dir + "/err");
  std::system(("rm -rf " + p.dir).c_str());
  return r;
}

/// start() and wait_for() in one.
inline Result run(const std::vector<std::string>& args, const std::vector<std::string>& env_add = {}) {
  return wait_for(start(args, env_add));
}

/// The pids in `dir`/rank-R.pid for R in 0..n-1 (rank_probe's --pid-dir), once all n are there or
/// `seconds` have passed.
inline std::vector<pid_t> wait_pid_files(const std::string& dir, int n, double seconds = 20) {
  auto until = Clock::now() + std::chrono::duration<double>(seconds);
  std::vector<pid_t> pids;
  while (Clock::now() < until) {
    pids.clear();
    for (int r = 0; r < n; ++r) {
      std::ifstream f(dir + "/rank-" + std::to_string(r) + ".pid");
      pid_t pid = 0;
      if (f >> pid) pids.push_back(pid);
    }
    if (static_cast<int>(pids.size()) == n) return pids;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pids;
}

}  // namespace nano::test::cli
