#pragma once
// The mpi backend's mpirun command for a world, and the environment mpirun runs in. The
// starter itself is make_mpi_starter (cli/rank_starter.h); these are apart for --dry-run.
#include <string>
#include <vector>

#include "cli/launch_setup.h"
#include "cli/options.h"

namespace nano {

/// The mpirun command that starts `s`'s ranks, each behind a rank shim that links back to
/// `link` (its launcher address and token; the environment is filled in here: the variables
/// the shims carry to the ranks, this attempt's job id and restart count).
std::vector<std::string> mpi_command_for(const LaunchOptions& o, const Setup& s, const ShimLink& link);

/// Open MPI settings of a one-host job (`job_dir` set; nothing otherwise), each added to `env`
/// unless the user chose otherwise:
/// - its files go to the job's own directory: the shared-memory transport's segments (btl vader
///   in Open MPI 4, btl sm in 5), the shared windows (osc sm) and the session directory (orte in
///   4, prte in 5). Names unknown to the running version are ignored by it.
/// - no TCP transport: ranks of one host talk through shared memory, and Open MPI 5's TCP
///   transport prints "Unable to find reachable pairing between local and remote interfaces"
///   once per rank on hosts whose interfaces it cannot pair.
void add_one_host_open_mpi_settings(const std::string& job_dir, Environment& env);

}  // namespace nano
