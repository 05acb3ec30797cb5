#pragma once
// What a launch would do, without starting anything (`nano-run --dry-run [--json]`, and
// the Python API's check before it creates anything): dry_run() describes a prepared world, the
// one launch() would start; the formatting is pure.
#include <string>

#include <vector>

#include "launcher/prepare/launch_setup.h"
#include "launcher/prepare/launch_types.h"

namespace nano {

/// What `prepared` (by prepare(), for either purpose) would start: each rank's host, CPUs,
/// threads and the variables that differ from this process's, the mpirun command, the notes.
DryRun dry_run(const Setup& prepared);

/// dry_run(prepare(options, argv, Purpose::kDryRun)). Throws UsageError like launch().
DryRun dry_run(const LaunchOptions& options, const std::vector<std::string>& argv);

/// A readable table: one row per rank (rank, host, CPUs, NUMA nodes, threads), then each
/// rank's variables, the mpirun command (mpi backend) and the notes.
std::string format_dry_run_table(const DryRun& plan);

/// {"backend": ..., "ranks": [{"rank", "host", "cpus": [..], "numa_nodes": [..], "threads",
/// "env": {NAME: VALUE}}], "command": [..], "notes": [..]} followed by a newline.
std::string format_dry_run_json(const DryRun& plan);

}  // namespace nano
