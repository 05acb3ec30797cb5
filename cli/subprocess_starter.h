#pragma once
// The subprocess backend's RankStarter: nano-run forks every rank itself, bound before exec
// (cli/subprocess.h), and signals each rank's process group.
#include <memory>

#include "cli/guardian.h"
#include "cli/launch_setup.h"
#include "cli/rank_starter.h"

namespace nano {

/// The subprocess backend: each rank forked and bound here.
std::unique_ptr<RankStarter> make_subprocess_starter(const Setup& setup, Guardian& guardian);

}  // namespace nano
