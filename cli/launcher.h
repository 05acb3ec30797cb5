#pragma once
// The launcher library (`nano::launcher`): start N planned, pinned ranks of a program and
// supervise them to the end. nano-run is a thin CLI over it; nano::TorchNano and nano::nano()
// call it from inside a training program. Sketch by the lead; the cli owner may refine it
// (keep `launch` and the result/failure fields, TorchNano depends on them).
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "env-init/planner.h"
#include "env-init/recipe.h"

namespace nano {

enum class Backend { automatic, subprocess, mpi };

/// Everything a launch needs besides the program itself.
struct LaunchOptions {
  PlanOptions plan;
  RecipeOptions recipe;
  Backend backend = Backend::automatic;
  std::string topology_xml;        ///< plan against this hwloc XML instead of this machine
  std::string synthetic;           ///< plan against this hwloc synthetic description
  std::string hostfile;            ///< mpi backend: Open MPI hostfile
  std::string hosts;               ///< mpi backend: "host:slots,host:slots"
  std::string master_addr;         ///< "" = 127.0.0.1 (or the first host)
  int master_port = 0;             ///< 0 = a free port picked by the launcher
  std::string log_dir;             ///< "" = no log files
  std::vector<int> output_ranks;   ///< empty = every rank's output is shown
  bool tag_output = true;          ///< prefix lines with "[rank N] "
  std::chrono::milliseconds grace_period{5000};  ///< SIGTERM -> SIGKILL delay at teardown
  std::map<std::string, std::string> extra_env;  ///< added to every rank (TorchNano uses it)
};

/// Why a launch failed: the first rank that failed (the root cause).
struct RankFailure {
  int rank = -1;
  std::string host;
  int exit_code = 0;        ///< the rank's exit code when it exited
  int signal = 0;           ///< the signal that killed it, 0 when it exited
  std::string stderr_tail;  ///< the last lines it wrote to stderr
};

/// The outcome of a launch. `exit_code` follows nano-run's contract: 0 all succeeded, the
/// failing rank's code, 128+signal, 130 on Ctrl-C.
struct LaunchResult {
  int exit_code = 0;
  std::optional<RankFailure> failure;
};

/// Plans, starts and supervises the ranks of `argv` (argv[0] = the program). Blocks until all
/// ranks are gone. Throws UsageError (nothing started) for bad options or a bad program.
LaunchResult launch(const LaunchOptions& options, const std::vector<std::string>& argv);

}  // namespace nano
