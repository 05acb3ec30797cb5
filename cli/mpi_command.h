#pragma once
// The Open MPI `mpirun` command line of the mpi backend. Pure: nano-run decides, this spells it.
#include <string>
#include <utility>
#include <vector>

#include "cli/hosts.h"

namespace nano {

/// What goes into the mpirun command.
struct MpiCommandInput {
  std::string mpirun = "mpirun";  ///< path of mpirun
  int num_processes = 1;
  std::vector<HostSlots> hosts;      ///< empty = this machine only
  bool as_root = false;              ///< add --allow-run-as-root (Open MPI refuses root otherwise)
  std::vector<std::string> shim;     ///< per-rank shim command, e.g. {nano-run, --nano-rank-shim, ...}
  std::vector<std::string> program;  ///< the user's program and its arguments
};

/// `mpirun -np N --bind-to none --map-by slot [--oversubscribe] [--allow-run-as-root]
/// [--host h:s,...] SHIM... -- PROGRAM...` (no -x: the environment travels in the shim's
/// arguments, so a user's own mca_base_env_list still works). Open MPI's own binding is off because the
/// shim binds every rank from nano's plan; ranks fill hosts in order (slot mapping), which is
/// what `group_starts` assumes; a single-host run allows oversubscription because nano's planner
/// has already decided (and refused, unless asked) too many ranks.
std::vector<std::string> make_mpi_command(const MpiCommandInput& input);

/// Joins a command for display, quoting words that a shell would split.
std::string shell_join(const std::vector<std::string>& words);

}  // namespace nano
