#pragma once
// The job's guardian: a small process forked when a launch starts that outlives the launcher
// if it must. Whatever kills the launcher (SIGKILL, the OOM killer, a crash), the guardian sees
// its socket close and then SIGKILLs every process group it was told about and not told to
// forget (each rank's whole tree: its children, data-loader workers, `cmd &` of a rank script),
// each only while it is still ours (launcher/process/process_group.h: by the leader's pidfd, handed over
// with SCM_RIGHTS, or its start time), and removes the job's files (nano's and Open MPI's
// shared-memory files, the job's folders). A launch that ends normally cleans up itself and
// dismisses the guardian first.
//
// The child runs only async-signal-safe system calls and allocates nothing (it is forked from
// programs that may have threads: an in-program launch), keeps no descriptor but its socket and
// the pidfds it is handed, ignores terminal signals, and has its own process group.
#include <sys/types.h>

#include <string>

#include "launcher/process/process_group.h"

namespace nano {

class Guardian {
 public:
  /// Forks the guardian. Throws Error when it cannot (pipe or fork failed).
  Guardian();
  /// Dismisses the guardian (see dismiss()).
  ~Guardian();
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;

  /// If the launcher dies, SIGKILL process group `leader.pid` while it is still ours
  /// (signal_group_of); `pidfd`: the leader's (-1 = none), of which the guardian keeps a copy.
  void watch_group(const GroupLeader& leader, int pidfd = -1);
  /// Group `pgid` ended: the guardian no longer signals it (its number may go to someone else).
  void forget_group(pid_t pgid);
  /// If the launcher dies, remove `path` (a file or a directory tree).
  void remove_path(const std::string& path);
  /// If the launcher dies, remove every entry of directory `dir` whose name starts with `prefix`.
  void remove_prefix(const std::string& dir, const std::string& prefix);
  /// The launch ended and cleaned up itself: the guardian exits without doing anything.
  void dismiss();

 private:
  void send(char kind, const std::string& value, int pass_fd = -1);
  pid_t pid_ = -1;
  int fd_ = -1;  // our end of the socket; the launcher's death closes it
};

/// Removes `path` like `rm -rf` (no error when it is missing); returns false when something
/// could not be removed. Async-signal-safe (no allocation), depth-limited to 32.
bool remove_tree(const char* path);

/// Removes every entry of `dir` whose name starts with `prefix`, as remove_tree does.
bool remove_with_prefix(const char* dir, const char* prefix);

}  // namespace nano
