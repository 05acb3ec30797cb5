#pragma once
// The mpi backend's RankStarter: mpirun (cli/mpi_command.h) on a rank shim per rank, the shims
// linked back to a socket nano-run listens on (cli/shim_channels.h).
#include <memory>

#include "cli/guardian.h"
#include "cli/launch_setup.h"
#include "cli/rank_starter.h"
#include "cli/shim_channels.h"

namespace nano {

/// The mpi backend: mpirun on the rank shims, which link to `shims`.
std::unique_ptr<RankStarter> make_mpi_starter(const LaunchOptions& options, const Setup& setup, Guardian& guardian,
                                              ShimChannels& shims);

}  // namespace nano
