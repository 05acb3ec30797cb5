#pragma once
// nano-run's command line (CLI11) parsed into LaunchOptions. Pure: no I/O, no process start;
// every bad value is a SettingError naming it. The one place nano-run's flags are declared:
// their names come from command_line_flag (core/setting.h), as the errors' do.
#include <map>
#include <string>
#include <vector>

#include "launcher/prepare/launch_types.h"
#include "launcher/tune/tuner.h"

namespace nano {

/// A parsed nano-run command line.
struct RunCommand {
  enum Kind { kRun, kHelp, kVersion };
  Kind kind = kRun;
  std::string text;  ///< help or version text to print
  LaunchOptions launch;
  std::vector<std::string> argv;  ///< PROGRAM ARGS...
  bool dry_run = false;
  bool json = false;
  /// --tune: measure the program at candidate layouts, print the table, store the winner.
  bool tune = false;
  /// -n auto: run the layout stored for this machine and program (tuning first when none is).
  bool auto_ranks = false;
  TuneOptions tune_options;  ///< --tune-* and --max-ranks
};

/// Parses nano-run's arguments (without argv[0]). Throws UsageError with a one-line message: a
/// SettingError for a bad value (main words it with command_line_flag), checked here only as
/// far as the text goes; what the values mean together is the launcher's to check
/// (check_launch_options, make_plan).
RunCommand parse_run_command(const std::vector<std::string>& args);

/// nano-run's version line ("nano-run 0.1.0", the project's version in CMake).
std::string version_text();

}  // namespace nano
