#pragma once
// The job's guardian: a small process forked when a launch starts that outlives the launcher
// if it must. Whatever kills the launcher (SIGKILL, the OOM killer, a crash), the guardian sees
// its pipe close and then SIGKILLs every process group it was told about (each rank's whole
// tree: its children, data-loader workers, `cmd &` of a rank script) and removes the job's
// files (nano's and Open MPI's shared-memory files, Open MPI's session directory). A launch
// that ends normally cleans up itself and dismisses the guardian first.
//
// The child runs only async-signal-safe system calls (it is forked from programs that may have
// threads: an in-program launch), keeps no descriptor but its pipe, ignores terminal signals,
// and has its own process group.
#include <sys/types.h>

#include <string>

namespace nano {

class Guardian {
 public:
  /// Forks the guardian. Throws Error when it cannot (pipe or fork failed).
  Guardian();
  /// Dismisses the guardian (see dismiss()).
  ~Guardian();
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;

  /// If the launcher dies, SIGKILL process group `pgid`.
  void watch_group(pid_t pgid);
  /// If the launcher dies, remove `path` (a file or a directory tree).
  void remove_path(const std::string& path);
  /// If the launcher dies, remove every entry of directory `dir` whose name starts with `prefix`.
  void remove_prefix(const std::string& dir, const std::string& prefix);
  /// The launch ended and cleaned up itself: the guardian exits without doing anything.
  void dismiss();

 private:
  void send(char kind, const std::string& value);
  pid_t pid_ = -1;
  int fd_ = -1;  // the write end; the launcher's death closes it
};

/// Removes `path` like `rm -rf` (no error when it is missing); returns false when something
/// could not be removed. Async-signal-safe (no allocation), depth-limited to 32.
bool remove_tree(const char* path);

/// Removes every entry of `dir` whose name starts with `prefix`, as remove_tree does.
bool remove_with_prefix(const char* dir, const char* prefix);

}  // namespace nano
