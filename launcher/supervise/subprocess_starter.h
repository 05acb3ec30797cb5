#pragma once
// The subprocess backend's RankStarter: nano-run forks every rank itself, bound before exec
// (launcher/process/subprocess.h), and signals each rank's process group.
#include <memory>

#include "launcher/prepare/launch_setup.h"
#include "launcher/process/process_group.h"
#include "launcher/supervise/rank_starter.h"

namespace nano {

/// The subprocess backend: each rank forked and bound here.
std::unique_ptr<RankStarter> make_subprocess_starter(const Setup& setup, OwnGroups& groups);

}  // namespace nano
