#pragma once
// Starting one rank process: fork, then in the child (before exec) its own process group,
// death with the parent, CPU affinity and NUMA memory policy, so the binding holds with every
// OpenMP runtime and language. The only place nano forks.
#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/process/process_group.h"

namespace nano {

/// What to start and how to bind it.
struct SpawnRequest {
  std::vector<std::string> argv;  ///< argv[0] is the program's path (no PATH search)
  std::vector<std::string> env;   ///< complete environment, "NAME=VALUE"
  std::vector<int> cpus;          ///< OS indexes to bind to; empty = inherit
  std::vector<int> numa_nodes;    ///< memory policy MPOL_BIND to these; empty = leave as is
  bool capture_output = true;     ///< stdout/stderr go to pipes returned in Spawned
  bool null_stdin = true;         ///< stdin from /dev/null (ranks run in their own group)
};

/// A started process. The caller owns the pipe read ends (and `group`, a move-only handle).
struct Spawned {
  pid_t pid = -1;
  /// Its process group, known by its leader from right after fork (launcher/process/process_group.h):
  /// signalled through it, never by the bare pid, since the pid may be another's once reaped.
  OwnGroup group;
  int stdout_fd = -1;
  int stderr_fd = -1;
  std::vector<std::string> warnings;  ///< e.g. memory policy refused (the child went on)
};

/// Forks and execs `request`. The child: gets a new process group (pgid = its pid), is
/// SIGKILLed when the calling thread's process dies (PR_SET_PDEATHSIG), has default signal
/// dispositions and an empty signal mask, is bound with sched_setaffinity and set_mempolicy
/// (a refused memory policy, EPERM/ENOSYS as in many containers, becomes a warning). Throws
/// Error when binding or exec fails (the child is reaped). Async-signal-safe after fork, so
/// it may be called from a multi-threaded program.
Spawned spawn_process(const SpawnRequest& request);

/// Resolves a program name like execvp would: names with '/' are checked as given, others
/// searched in `path_env` (PATH). Throws UsageError "program not found: NAME" or
/// "program is not executable: PATH".
std::string resolve_program(const std::string& name, const std::string& path_env);

/// Checks that execve can run `path` (already resolved): an ELF binary, or a script whose
/// #! interpreter exists and is executable (with `/usr/bin/env NAME`, NAME is looked up in
/// `path_env`). Throws UsageError naming the program and what is wrong, e.g. "cannot run
/// ./train.sh: it has no #! line and is not a binary" or "cannot run ./t.py: its interpreter
/// /usr/bin/python9 is not installed". A file it cannot read is left to execve.
void check_runnable(const std::string& path, const std::string& path_env);

/// Decodes a waitpid status into (exit code, signal); exactly one is meaningful.
void decode_wait_status(int status, int& exit_code, int& signal);

}  // namespace nano
