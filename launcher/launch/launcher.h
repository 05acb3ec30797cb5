#pragma once
// The launcher library (`nano::launcher`): start N planned, pinned ranks of a program and
// supervise them to the end. nano-run is a thin CLI over it; nano::TorchNano and nano::nano()
// call it from inside a training program.
//
// Backends. `subprocess`: the launcher forks every rank itself (launcher/process/subprocess.h binds it
// before exec). `mpi`: the launcher runs Open MPI's mpirun (its binding off) on a per-rank
// *shim* placed in front of the program; the shim reads OMPI_COMM_WORLD_*, plans against its
// own host's topology, binds, sets the environment, fork/execs the program and streams the
// program's output and final status back to the launcher over TCP (launcher/process/frames.h), so output
// tagging and the root-cause report are the same on both backends.
//
// The shim is `nano-run --nano-rank-shim SPEC -- PROGRAM ARGS...` (cli/shim.h), so the shim
// and the command line stay out of what training programs link. The launcher finds nano-run
// (LaunchOptions::shim_executable when set, else $NANO_RUN, else this executable when it is
// nano-run, else nano-run beside this executable, in the build's bin folder, in the install
// bindir, on PATH).
// Threads: the ranks are tied to the thread that calls launch() (PR_SET_PDEATHSIG); launch()
// blocks until they are gone, so call it from a thread that lives at least that long.
#include <string>
#include <vector>

#include "launcher/prepare/launch_setup.h"
#include "launcher/prepare/launch_types.h"

namespace nano {

/// Starts and supervises the world `prepared` describes (prepare() with Purpose::kLaunch: a dry
/// run's plan is refused) and starts it again after a failure while restarts are left, each
/// restart renewing only its job id, secret and picked port — or, in an elastic launch
/// (LaunchOptions::min_hosts), planned again on the hosts that answer (launcher/launch/elastic_hosts.h). Blocks until
/// all ranks are gone. Prints tagged rank output and, on failure, the root-cause summary to stderr.
/// SIGINT/SIGTERM/SIGHUP received meanwhile are forwarded to the ranks (handlers restored after).
LaunchResult launch(Setup prepared);

/// launch(prepare(options, argv, Purpose::kLaunch)): plans, starts and supervises the ranks of
/// `argv` (argv[0] = the program). Throws UsageError (nothing started) for bad options or a bad
/// program: a SettingError (core/setting.h) when one setting is wrong, for the front end to word.
LaunchResult launch(const LaunchOptions& options, const std::vector<std::string>& argv);

}  // namespace nano
