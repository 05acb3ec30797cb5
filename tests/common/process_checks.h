#pragma once
// Small helpers of the process-level tests (header-only, test code only): temporary folders,
// whole files, and whether processes are still alive.
#include <stdlib.h>
#include <sys/types.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace nano::test {

/// A fresh folder /tmp/<prefix>_XXXXXX.
inline std::string temp_dir(const std::string& prefix = "nano_test") {
  std::string tmpl = "/tmp/" + prefix + "_XXXXXX";
  return mkdtemp(tmpl.data());
}

/// The whole file ("" when missing).
inline std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

/// True while `pid` exists and is not a zombie.
inline bool alive(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  auto close_paren = line.rfind(')');
  return close_paren != std::string::npos && line.size() > close_paren + 2 && line[close_paren + 2] != 'Z';
}

/// True when none of `pids` is alive within `seconds`.
inline bool all_dead_within(const std::vector<pid_t>& pids, double seconds) {
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    bool any = false;
    for (pid_t p : pids) any = any || alive(p);
    if (!any) return true;
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace nano::test
