#pragma once
// The launch half of an in-program run: re-executes this program as N ranks through nano's
// launcher (launcher/launch/launcher.h) and waits. Kept free of torch headers so the launcher side
// compiles in seconds (launcher/prepare/launch_types.h is light: the planner's and recipe's types). The
// options come from runtime/options/in_program_options.h.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nano/in_program_error.h>

#include "core/rank_contract.h"
#include "launcher/prepare/launch_types.h"

namespace nano {

struct Setup;  // launcher/prepare/launch_setup.h

namespace in_program {

/// Environment variables of the in-program contract (set by the caller in every rank).
inline constexpr const char* kMarkerVar = contract::kInProgram;        ///< launch index, "1"...
inline constexpr const char* kResultVar = contract::kInProgramResult;  ///< file rank 0 writes

/// A launch of this program prepared once (launcher/prepare/launch_setup.h's Setup: the options, the
/// plan, the port, the first attempt's identity) for launch_self() to start. Move-only.
class PreparedLaunch {
 public:
  PreparedLaunch(PreparedLaunch&&) noexcept;
  PreparedLaunch& operator=(PreparedLaunch&&) noexcept;
  ~PreparedLaunch();

 private:
  friend PreparedLaunch prepare_self(const LaunchOptions& options, bool tune_first);
  friend void launch_self(PreparedLaunch prepared);
  PreparedLaunch(std::unique_ptr<Setup> setup, bool tune_first);
  std::unique_ptr<Setup> setup_;
  bool tune_first_ = false;
};

/// Every check launch_self() makes before it starts a rank (the options, the plan, the port),
/// made once, starting nothing: throws UsageError. The caller runs it before it creates anything
/// of its own. With `tune_first` (TorchNanoOptions::num_processes = kAuto) the options are
/// checked with the default layout, and launch_self() plans again for the layout it tunes.
PreparedLaunch prepare_self(const LaunchOptions& options, bool tune_first);

/// Pure: splits the NUL-separated bytes of /proc/self/cmdline into argv.
std::vector<std::string> split_cmdline(const std::string& bytes);

/// This program's argv as the kernel recorded it, argv[0] replaced by /proc/self/exe.
std::vector<std::string> self_argv();

/// `options` with the layout tuned for this machine and this program (TorchNanoOptions::
/// num_processes = kAuto): the stored one, else a tuning of this program first, its trials and
/// table said on stderr and its winner stored (launcher/tune/auto_layout.h). Throws UsageError (nothing
/// started) as the tuning's checks do, RankFailedError when the tuning was interrupted (its
/// launch exit code 128 + the signal) and Error when every layout failed.
LaunchOptions with_tuned_layout(const LaunchOptions& options);
/// Starts the ranks of this program (self_argv()) that `prepared` planned, with its options'
/// extra_env added, and waits for all of them (tuning the layout first where prepared so, as
/// with_tuned_layout() says). Throws UsageError (nothing started) as the tuning's checks do and
/// RankFailedError when a rank failed (the others are stopped).
void launch_self(PreparedLaunch prepared);

}  // namespace in_program
}  // namespace nano
