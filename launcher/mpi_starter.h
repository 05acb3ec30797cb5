#pragma once
// The mpi backend's RankStarter: mpirun (launcher/mpi_command.h) on a rank shim per rank, the shims
// linked back to a socket nano-run listens on (launcher/shim_channels.h).
#include <memory>

#include "launcher/launch_setup.h"
#include "launcher/process_group.h"
#include "launcher/rank_starter.h"
#include "launcher/shim_channels.h"

namespace nano {

/// The mpi backend: mpirun on the rank shims, which link to `shims`.
std::unique_ptr<RankStarter> make_mpi_starter(const Setup& setup, OwnGroups& groups, ShimChannels& shims);

}  // namespace nano
