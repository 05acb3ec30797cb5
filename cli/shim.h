#pragma once
// The mpi backend's per-rank shim, `nano-run --nano-rank-shim SPEC -- PROGRAM ARGS...`: part of
// nano-run only, not of the launcher library that training programs link. SPEC is the JSON of
// a ShimSpec (launcher/mpi/shim_spec.h).
namespace nano {

/// True when argv[1] is the internal "--nano-rank-shim" marker.
bool is_rank_shim_invocation(int argc, char** argv);

/// Runs one rank behind its shim: plans the host's ranks and makes this rank's environment with
/// nano-run's own stages (launcher/prepare/launch_setup.h), starts the program bound to its CPUs, and streams
/// its output, error file and status to nano-run. Returns the rank program's exit code
/// (128+signal when killed) when not linked to nano-run, 0 when linked (nano-run has the real
/// status); 2 on bad input.
int run_rank_shim(int argc, char** argv);

}  // namespace nano
