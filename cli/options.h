#pragma once
// nano-run's command line (CLI11) parsed into LaunchOptions. Pure: no I/O, no process start;
// every bad value is a UsageError naming it.
#include <map>
#include <string>
#include <vector>

#include "cli/launcher.h"
#include "cli/torchrun_env.h"

namespace nano {

/// The internal first argument that turns nano-run into the mpi backend's rank shim.
constexpr const char* kRankShimFlag = "--nano-rank-shim";

/// Where an mpi-backend shim reports to (hidden options of the shim mode).
struct ShimLink {
  std::string launcher;           ///< "host:port" of the launcher's listener; "" = exec directly
  std::string token;              ///< proves the shim belongs to this launch
  std::vector<int> group_starts;  ///< first global rank of every host ({0} for one host)
  /// Variables every shim sets over its host's own environment (cli/carried_env.h), so ranks on
  /// other hosts run configured as on the launching one.
  std::map<std::string, std::string> env;
  /// The attempt the shims start (job id "" = none, as in a dry run's command): each shim adds
  /// its rank's attempt_variables, as nano-run does for the subprocess backend.
  AttemptIdentity attempt;
};

/// A parsed nano-run command line.
struct RunCommand {
  enum Kind { kRun, kHelp, kVersion };
  Kind kind = kRun;
  std::string text;  ///< help or version text to print
  LaunchOptions launch;
  std::vector<std::string> argv;  ///< PROGRAM ARGS...
  bool dry_run = false;
  bool json = false;
  bool rank_shim = false;  ///< started as the mpi backend's rank shim
  ShimLink link;
};

/// Parses nano-run's arguments (without argv[0]). Throws UsageError with a one-line message.
RunCommand parse_run_command(const std::vector<std::string>& args);

/// nano-run's version line ("nano-run 0.1.0").
std::string version_text();

/// The shim's arguments for `options` (the plan, recipe and rendezvous options that every
/// rank's shim needs), ending before "--"; parse_run_command reads them back.
std::vector<std::string> shim_arguments(const LaunchOptions& options, const ShimLink& link);

/// "jemalloc", "tcmalloc", "system" or "auto".
std::string allocator_name(Allocator allocator);

}  // namespace nano
