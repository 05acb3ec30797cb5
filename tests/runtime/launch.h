#pragma once
// Test-only launchers for the runtime's process-level tests: N copies of a program with the
// rank contract (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
// or `mpirun -np N program`. Output of every rank is captured; a run past its deadline is
// killed (its process group) and reported with exit code 124.
#include <map>
#include <string>
#include <vector>

#include <nano/environment.h>

namespace nano::test {

struct RankResult {
  int exit_code = -1;  // 128+signal for a signal, 124 on timeout
  long pid = -1;       // the rank's process id (names it made in /dev/shm carry it)
  std::string out;     // stdout
  std::string err;     // stderr
};

using nano::Environment;

/// Runs `ranks` (a subset of 0..world-1) of `argv` with the rank contract for `world` ranks on
/// 127.0.0.1:`port` (0 = a free port), plus `extra` variables (which may set LOCAL_RANK and
/// LOCAL_WORLD_SIZE, to pose as ranks on several hosts). Returns one result per rank.
std::vector<RankResult> run_ranks(const std::vector<std::string>& argv, int world, const std::vector<int>& ranks,
                                  const Environment& extra = {}, int port = 0, int timeout_s = 120);

/// All ranks 0..world-1.
std::vector<RankResult> run_world(const std::vector<std::string>& argv, int world, const Environment& extra = {},
                                  int timeout_s = 120);

/// `mpirun -np world argv...` (allow-run-as-root set, binding off); one combined result.
RankResult run_mpirun(const std::vector<std::string>& argv, int world, const Environment& extra = {},
                      int timeout_s = 120);

/// Any command (e.g. nano-run), allow-run-as-root set; one combined result.
RankResult run_command(const std::vector<std::string>& argv, const Environment& extra = {}, int timeout_s = 120);

}  // namespace nano::test
