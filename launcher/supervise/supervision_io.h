#pragma once
// What supervision asks of the system, behind one small interface: nano-run's supervision loop
// (launcher/supervise/supervision_loop.h) and the rank shim's (launcher/mpi/shim_loop.h) alike. Waiting on descriptors,
// reading and writing them, accepting shims' links, reaping and signalling processes, the
// process's own signals, its parent, the clock. The system's implementation is a
// thin layer over the calls (launcher/supervise/supervision_io-posix.cc); tests drive the loop through a fake
// one, with a clock of their own, in milliseconds and without processes.
#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/process/process_group.h"

namespace nano {

/// How a process ended: exactly one of the two is meaningful.
struct ProcessEnd {
  int exit_code = 0;
  int signal = 0;  ///< the signal that killed it; 0 when it exited
};

class SupervisionIo {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~SupervisionIo() = default;

  /// From now until release_signals(), nano-run's SIGINT, SIGTERM, SIGHUP and SIGCHLD are caught
  /// (their previous handling comes back after), each readable at signal_fd().
  virtual void catch_signals() = 0;
  virtual void release_signals() = 0;
  /// Readable when a caught signal waits.
  virtual int signal_fd() = 0;
  /// The caught signals not taken yet, in order.
  virtual std::vector<int> take_signals() = 0;

  /// Waits at most `timeout` for one of `fds` to be ready (poll(2); negative fds are skipped);
  /// fills their revents. Returns how many are ready, 0 when none.
  virtual int poll(std::vector<pollfd>& fds, std::chrono::milliseconds timeout) = 0;
  /// Reads at most `size` bytes of `fd` into `buffer`: the count read; 0 at the end of the stream
  /// (or an error); -1 when nothing can be read now (EINTR, EAGAIN).
  virtual long read(int fd, char* buffer, size_t size) = 0;
  /// Sends an encoded frame to a shim's link whole, waiting for room at most kShimFrameWrite
  /// (launcher/process/timeouts.h); never raises SIGPIPE. False when it did not go whole.
  virtual bool send_frame(int fd, const std::string& frame) = 0;
  /// Writes `bytes` to `fd` whole, waiting as long as `fd` blocks (the rank shim's frames and
  /// output: its rank waits for them to go). False when `fd` failed (a closed peer).
  virtual bool write_whole(int fd, const std::string& bytes) = 0;
  /// A shim's connection to `listen_fd` (close-on-exec); -1 = none waits.
  virtual int accept(int listen_fd) = 0;
  virtual void close(int fd) = 0;

  /// How `pid` (a child of nano-run) ended, once, if it has; it is reaped then. Never waits.
  virtual std::optional<ProcessEnd> reap(pid_t pid) = 0;
  /// Sends `sig` to process group `pgid`: only to a group this process made or was told of
  /// (watch_group), and only while it is still ours (launcher/process/process_group.h: a group whose leader
  /// was reaped and whose pid went to another process is left alone).
  virtual void signal_group(pid_t pgid, int sig) = 0;
  /// Process group `leader.pid` (a rank's, on this host, started by its shim) is the job's: it
  /// may be signalled, and goes down also when nano-run dies (launcher/process/guardian.h).
  virtual void watch_group(const GroupLeader& leader) = 0;

  virtual Clock::time_point now() = 0;
  /// This process's parent now (the rank shim's mpirun or orted, while it lives).
  virtual pid_t parent() = 0;
};

/// The system's calls. `groups`: the process groups that may be signalled, where watched groups
/// are added (and so go under the watch of its guardian, when it has one: the rank shim's has
/// none, since it watches its one rank itself).
std::unique_ptr<SupervisionIo> make_system_supervision_io(OwnGroups* groups);

}  // namespace nano
