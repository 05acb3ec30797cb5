#pragma once
// The rank shim's side of supervision (cli/shim.h): it watches one rank until the rank ended,
// its output is drained and, when linked, nano-run released it. It forwards the rank's output
// and final status over the link, delivers the signals nano-run (or mpirun) sends to the rank's
// whole process group, exchanges heartbeats with nano-run (launcher/supervise/heartbeat.h), and gives the rank
// up on its own when nobody supervises it any more: its parent (mpirun or orted) gone, the link
// closed, or nano-run silent. Every system call goes through a SupervisionIo, the one nano-run's
// loop uses (launcher/supervise/supervision_io.h), so tests run it on a fake, in milliseconds, without
// processes; the effects of giving up (killing, removing files, exiting) are the caller's.
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nano/error.h>
#include "launcher/process/frames.h"
#include "launcher/supervise/heartbeat.h"
#include "launcher/supervise/supervision_io.h"

namespace nano {

/// Why the loop gave the rank up without nano-run's release.
enum class ShimAbandon {
  kNone,            ///< it ran to its end
  kParentGone,      ///< mpirun or orted is gone: nobody supervises the shim any more
  kLauncherGone,    ///< the link closed: nano-run was killed
  kLauncherSilent,  ///< no word from nano-run for the heartbeat timeout: a cut link or a lost host
};

/// What the loop watches.
struct ShimLoopSetup {
  int link = -1;            ///< the link to nano-run; -1: none, the output goes to fds 1 and 2
  pid_t rank = -1;          ///< the rank's process, which leads its process group
  std::vector<int> output;  ///< the rank's stdout and stderr pipes (empty when not captured)
  int stdout_fd = -1;       ///< which of `output` is its stdout
  pid_t parent = -1;        ///< the shim's parent when it started
  std::chrono::milliseconds heartbeat_timeout{30000};
};

/// How the loop ended.
struct ShimLoopEnd {
  ProcessEnd rank;  ///< how the rank ended (meaningful when `abandoned` is kNone)
  ShimAbandon abandoned = ShimAbandon::kNone;
  std::chrono::milliseconds silence{0};  ///< kLauncherSilent: how long nano-run had been silent
};

class ShimLoop {
 public:
  /// `from_launcher`: the link's decoder, which may hold frames read before the loop (after the
  /// challenge). `report`: called once, when the rank ended and its output is drained, before
  /// the loop waits for the release (the caller sends the error file and the final status).
  ShimLoop(const ShimLoopSetup& setup, FrameDecoder& from_launcher, SupervisionIo& io,
           std::function<void(const ProcessEnd&)> report);

  /// Runs to the end: the rank's, or the moment the loop gives it up (its group is SIGKILLed
  /// then; the rest of giving up is the caller's). The caller caught the signals already
  /// (SupervisionIo::catch_signals), before the rank started.
  ShimLoopEnd run();

  /// Sends `frame` to nano-run whole (the rank waits for its output to go), or the payload to
  /// fd 1 or 2 when not linked.
  void send(FrameType type, const std::string& payload);

 private:
  bool linked() const { return setup_.link >= 0; }
  void deliver(int sig);
  void keep_heartbeat();
  void read_link();
  void read_link_frames();
  void forward_output(int fd);
  void give_up(ShimAbandon why);

  ShimLoopSetup setup_;
  FrameDecoder& from_launcher_;
  SupervisionIo& io_;
  std::function<void(const ProcessEnd&)> report_;
  Heartbeat heartbeat_;
  std::vector<int> open_;  // output pipes not at their end yet
  ShimLoopEnd end_;
  bool exited_ = false, reported_ = false, released_ = false;
};

/// Pure: whether a process of this name (/proc/PID/comm) is Open MPI's daemon or launcher, the
/// only parent a rank shim that gives up may take down with it (never a subreaper it was handed
/// to, such as a container's init or systemd --user, when its daemon died before it looked).
bool is_open_mpi_parent(const std::string& comm);

}  // namespace nano
