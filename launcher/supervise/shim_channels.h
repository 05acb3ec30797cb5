#pragma once
// nano-run's side of the links to the mpi backend's rank shims (launcher/process/frames.h is the wire
// format): which connection belongs to which rank (the challenge, the hello that answers it
// with the attempt's secret), the rank's process
// group, output and final status from its frames, when each shim was last heard from, and the
// signal / release / heartbeat frames nano-run sends. Sockets are read by the supervision loop;
// this state decides what their bytes mean. Frames go out, and the time is told, through the
// loop's SupervisionIo (launcher/supervise/supervision_io.h), so tests see both.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "launcher/process/frames.h"
#include "launcher/process/output.h"
#include "launcher/process/process_group.h"
#include "launcher/supervise/supervision_io.h"

namespace nano {

/// One stream nano-run reads: a rank's (or mpirun's) stdout/stderr pipe, or a shim's link.
struct Channel {
  int fd = -1;
  int rank = -1;  ///< pipes: the rank (kMpirunStream for mpirun); shims: after hello
  Stream stream = Stream::kOut;
  bool shim = false;  ///< a framed connection from a rank shim
  bool hello = false;
  FrameDecoder decoder;
  std::string challenge;                         ///< shims: what the hello must answer (ShimChannels::greet)
  std::chrono::steady_clock::time_point opened;  ///< shims: when it was accepted
};

/// Connections to nano-run's shim listener that have not said hello yet, at most: one more
/// closes the oldest of them, so a flood of strangers neither exhausts nano-run's descriptors
/// nor keeps a shim out (a shim says hello within a round trip of connecting).
inline constexpr size_t kMaxShimsAwaitingHello = 64;

/// Pure: the payload of a shim's kStarted frame for its rank led by `leader`: "<pid> <start time>",
/// so nano-run knows the rank's group on its own host from a later one of the same number.
std::string started_payload(const GroupLeader& leader);

/// Pure: the leader a kStarted payload names ("<pid>" alone: start time 0, unknown); pid 0 when
/// the payload is no such thing.
GroupLeader parse_started(const std::string& payload);

/// What the shims' frames tell the supervision loop.
class ShimEvents {
 public:
  virtual ~ShimEvents() = default;
  /// `rank`'s program runs as process group `leader.pid` on nano-run's own host (one-host jobs
  /// only), led by `leader` (its start time as its shim read it; 0 when not told).
  virtual void rank_started_here(int rank, const GroupLeader& leader) = 0;
  /// `rank`'s final status arrived (its output is finished already).
  virtual void rank_ended(int rank, int exit_code, int signal) = 0;
};

/// The per-rank state of the shims' links of one world.
class ShimChannels {
 public:
  using Clock = SupervisionIo::Clock;

  /// `one_host`: the ranks run on nano-run's host, so their process groups are reported. `io`:
  /// where frames are sent and the time is read.
  ShimChannels(int world_size, bool one_host, OutputRouter& router, ShimEvents& events, SupervisionIo& io);

  /// The attempt's secret (core/job_secret.h): a hello that does not answer its link's
  /// challenge with it is not one of ours.
  void set_secret(const std::string& secret) { secret_ = secret; }
  /// The timeline's records folder (launcher/timeline/timeline_merge.h; "" = no timeline): records that shims
  /// on other hosts ship are written there.
  void set_timeline_folder(const std::string& folder) { timeline_folder_ = folder; }

  /// A new connection `ch` to the shims' listener: sends it its challenge, and takes frames from
  /// it only as large as a hello until it said one.
  void greet(Channel& ch);

  /// Takes `size` bytes read from shim channel `ch`. Returns true when the channel must close:
  /// a first frame that is not a hello answering its challenge (or that names a rank already
  /// linked), or bytes that are no frame (reported through the router, naming the cause).
  bool take(Channel& ch, const char* data, size_t size);
  /// `ch` reached end of stream: its rank's output ends there.
  void ended(const Channel& ch);
  /// `ch` is about to be closed: no frame goes to it any more.
  void forget(const Channel* ch);

  /// Sends `frame` to `rank`'s shim whole, if linked; never raises SIGPIPE, and waits for room
  /// no longer than kShimFrameWrite (launcher/process/timeouts.h).
  void send(int rank, const std::string& frame);
  /// Sends the heartbeat frame to every linked shim.
  void send_heartbeats();
  /// A teardown with `signal` is under way: shims that link later get it at once.
  void set_teardown_signal(int signal) { teardown_signal_ = signal; }
  /// Every rank has ended: tells every shim it may exit, and shims that link later too.
  /// Returns false when it had been done already.
  bool release();
  /// True once release() was done.
  bool released() const { return released_; }

  /// True while `rank`'s shim is linked (said hello, not closed, not lost).
  bool linked(int rank) const { return shims_[static_cast<size_t>(rank)] != nullptr; }
  /// `rank` counts as lost: its link is dropped.
  void unlink(int rank) { shims_[static_cast<size_t>(rank)] = nullptr; }
  /// When a frame last came from `rank`'s shim.
  Clock::time_point heard(int rank) const { return heard_[static_cast<size_t>(rank)]; }
  /// Whether `rank`'s shim ever said hello (linked now or not).
  bool said_hello(int rank) const { return heard(rank) != Clock::time_point{}; }
  /// By rank: the host its shim said hello from (this host until then).
  const std::vector<std::string>& hosts() const { return hosts_; }
  /// By rank: its process group on this host (one-host jobs), -1 = not known.
  const std::vector<pid_t>& groups() const { return groups_; }
  /// `rank`'s torchelastic error file as its shim sent it; "" = none.
  const std::string& error_file(int rank) const { return error_files_[static_cast<size_t>(rank)]; }

 private:
  bool take_frames(Channel& ch);

  int world_size_;
  bool one_host_;
  OutputRouter& router_;
  ShimEvents& events_;
  SupervisionIo& io_;
  std::string secret_;
  std::string timeline_folder_;
  std::vector<std::string> hosts_;
  std::vector<Channel*> shims_;           // by rank: the shim's link, once it said hello
  std::vector<pid_t> groups_;             // by rank: its process group on this host
  std::vector<Clock::time_point> heard_;  // by rank: the last frame from its shim
  std::vector<std::string> error_files_;  // by rank: its error file's bytes, from its shim
  int teardown_signal_ = 0;               // the signal of a teardown under way
  bool released_ = false;
};

}  // namespace nano
