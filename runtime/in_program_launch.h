#pragma once
// The launch half of an in-program run: re-executes this program as N ranks through nano's
// launcher (cli/launcher.h) and waits. Kept free of torch headers so the launcher side
// compiles in seconds.
#include <map>
#include <string>
#include <vector>

#include "runtime/in_program_error.h"

namespace nano {
namespace in_program {

/// Environment variables of the in-program contract (set by the caller in every rank).
inline constexpr const char* kMarkerVar = "NANO_IN_PROGRAM";        ///< launch index, "1"...
inline constexpr const char* kResultVar = "NANO_IN_PROGRAM_RESULT";  ///< file rank 0 writes

/// What to launch: a plain copy of the TorchNanoOptions fields the launcher needs.
struct SelfLaunch {
  int num_processes = 1;
  std::vector<std::vector<int>> cpu_for_each_process;  ///< empty = planned automatically
  std::string distributed_backend = "subprocess";       ///< "subprocess" | "mpi" ("fork": refused)
  bool oversubscribe = false;
  std::string hostfile;                                 ///< mpi only
  std::string hosts;                                    ///< mpi only, "host:slots,..."
  std::string log_dir;
  int grace_period_ms = 5000;
  int max_restarts = 0;
  std::map<std::string, std::string> extra_env;
};

/// Pure: "0;1" from {{0},{1}}, "0-3;4,6" style ranges kept simple ("0,1,2,3;4,6").
/// Throws UsageError for an empty list or a negative CPU.
std::string cpu_lists_to_string(const std::vector<std::vector<int>>& lists);

/// Pure: checks the options (num_processes >= 1, backend name, list count = num_processes,
/// hostfile/hosts only with mpi). Throws UsageError with one line naming the bad value.
void check_self_launch(const SelfLaunch& launch);

/// Pure: splits the NUL-separated bytes of /proc/self/cmdline into argv.
std::vector<std::string> split_cmdline(const std::string& bytes);

/// This program's argv as the kernel recorded it, argv[0] replaced by /proc/self/exe.
std::vector<std::string> self_argv();

/// Checks, starts `launch.num_processes` ranks of this program (self_argv()) with
/// launch.extra_env added, and waits for all of them. Throws UsageError (nothing started)
/// for bad options and RankFailedError when a rank failed (the others are stopped).
void launch_self(const SelfLaunch& launch);

}  // namespace in_program
}  // namespace nano
