#pragma once
// Printing a DryRun (`nano-run --dry-run [--json]`). Pure.
#include <string>

#include "cli/launcher.h"

namespace nano {

/// A readable table: one row per rank (rank, host, CPUs, NUMA nodes, threads), then each
/// rank's variables, the mpirun command (mpi backend) and the notes.
std::string format_dry_run_table(const DryRun& plan);

/// {"backend": ..., "ranks": [{"rank", "host", "cpus": [..], "numa_nodes": [..], "threads",
/// "env": {NAME: VALUE}}], "command": [..], "notes": [..]} followed by a newline.
std::string format_dry_run_json(const DryRun& plan);

}  // namespace nano
