#pragma once
// How a backend starts a world's ranks, stops them and cleans up after them, behind one
// interface, so the supervision loop (launcher/supervise/supervision_loop.h) is the same for both:
// - subprocess: nano-run forks every rank itself and signals each rank's process group;
// - mpi: nano-run starts mpirun on a rank shim per rank (cli/shim.cc); the shims link back to
//   a listening socket and deliver the signals nano-run sends them as frames.
#include <sys/types.h>

#include <string>
#include <vector>

#include "launcher/prepare/launch_setup.h"
#include "launcher/process/process_group.h"
#include "launcher/supervise/shim_channels.h"
#include "launcher/supervise/supervisor.h"

namespace nano {

/// A process a starter started, with its output pipes (read ends, owned by the receiver).
struct StartedProcess {
  pid_t pid = -1;  ///< also its process group
  int rank = -1;   ///< -1: the backend process (mpirun), whose end is not a rank's
  int stdout_fd = -1;
  int stderr_fd = -1;
};

/// What a starter started, for the supervision loop to watch.
struct Started {
  std::vector<StartedProcess> processes;
  int listen_fd = -1;                 ///< where rank shims connect; -1 = none
  std::vector<std::string> warnings;  ///< each once, e.g. a refused memory policy
};

class RankStarter {
 public:
  virtual ~RankStarter() = default;
  /// Starts the world. Each process's group is held (OwnGroups, so under the guardian's watch)
  /// before the next starts.
  /// Throws Error when a start fails, after taking down what it had started.
  virtual Started start() = 0;
  /// Delivers `sig` to every rank still running. `running`: the process groups of the started
  /// processes not reaped yet; `supervisor`: which ranks' ends are known. A stopped rank is
  /// continued after a SIGTERM/SIGINT/SIGHUP, so it can act on it.
  virtual void deliver(int sig, const std::vector<pid_t>& running, const Supervisor& supervisor) = 0;
  /// After every started process was reaped: takes down what the ranks' groups left (daemons),
  /// forgets the groups (they ended) and releases what start() opened. `started`: every started
  /// process's group.
  virtual void clean_up(const std::vector<pid_t>& started) = 0;
};

}  // namespace nano
