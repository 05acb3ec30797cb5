#pragma once
// The mpi backend's RankStarter: mpirun (launcher/mpi/mpi_command.h) on a rank shim per rank, the shims
// linked back to a socket nano-run listens on (launcher/supervise/shim_channels.h).
#include <memory>

#include "launcher/prepare/launch_setup.h"
#include "launcher/process/process_group.h"
#include "launcher/supervise/rank_starter.h"
#include "launcher/supervise/shim_channels.h"

namespace nano {

/// The mpi backend: mpirun on the rank shims, which link to `shims`.
std::unique_ptr<RankStarter> make_mpi_starter(const Setup& setup, OwnGroups& groups, ShimChannels& shims);

}  // namespace nano
