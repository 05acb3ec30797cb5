#pragma once
// Signals that reach only our own processes. nano signals a rank's whole process group (killpg),
// which it names by its leader's pid. Once that leader has been reaped, the number may go to
// another process, which may lead a group of its own: a signal sent by number could then reach a
// stranger. So every group nano signals is known by its leader as recorded when the group was
// made, before the leader could be reaped: a pidfd (Linux >= 5.3), and the leader's start time
// (/proc/PID/stat, field 22), which tells it from a later process of the same pid where no pidfd
// is held (the guardian, for groups it was not handed one of; a kernel without pidfd_open).
//
// Linux keeps a pid allocated while any process still has it as its process group id. So what
// the leader's pid shows now decides (may_signal_group):
//   the leader is alive (or a zombie not reaped yet) -> the group is ours: signal it;
//   the leader is gone and no process has its pid   -> only our orphans can hold the group:
//                                                      signal it (ESRCH when none is left);
//   the leader is gone and a process has its pid    -> that process is someone else's, and our
//                                                      group cannot exist any more: never.
// Between the look and the signal a stranger would have to be given the very pid, which needs
// the kernel's pid counter to come round the whole pid space; a start time is one clock tick
// (10 ms) coarse, which leaves the same: only root, writing ns_last_pid, can be that quick.
#include <sys/types.h>

#include <map>

namespace nano {

class Guardian;

/// A process group's leader as recorded when the group was made: its pid, which is the group's
/// id, and when it started.
struct GroupLeader {
  pid_t pid = -1;
  unsigned long long start_time = 0;  ///< /proc/PID/stat field 22, clock ticks since boot; 0 = not known
};

/// What a pidfd of the leader says.
enum class PidfdSays {
  kNone,   ///< no pidfd is held
  kAlive,  ///< the leader is there (running, or a zombie not reaped yet)
  kGone,   ///< the leader was reaped
};

/// What the system shows of a leader's pid now.
struct LeaderSight {
  PidfdSays pidfd = PidfdSays::kNone;
  bool pid_in_use = false;            ///< some process has the pid (kill(pid, 0) is not ESRCH)
  unsigned long long start_time = 0;  ///< that process's start time; 0 = not readable
};

/// Pure: whether process group `leader.pid` may be signalled, by the rule above. Without a pidfd
/// the leader counts as alive only when the pid's process has the recorded start time (an
/// unknown one matches nothing).
bool may_signal_group(const GroupLeader& leader, const LeaderSight& now);

// The system's side. Every function below is async-signal-safe and allocates nothing: the
// guardian's child (launcher/process/guardian.cc) calls them.

/// The start time of process `pid` (/proc/PID/stat field 22); 0 when there is no such process or
/// it cannot be read.
unsigned long long process_start_time(pid_t pid);

/// A pidfd of process `pid` (close-on-exec); -1 when the kernel has no pidfd_open (before 5.3)
/// or there is no such process.
int open_pidfd(pid_t pid);

/// Sends `sig` through `pidfd` (pidfd_send_signal): never to another process than the one it was
/// opened for. False when not sent (the process was reaped, no pidfd, no such call).
bool signal_through_pidfd(int pidfd, int sig);

/// What the system shows now of `leader`'s pid; `pidfd`: the leader's, -1 = none held.
LeaderSight look_at_leader(const GroupLeader& leader, int pidfd);

/// killpg(leader.pid, sig) when may_signal_group allows it; true when the signal was sent.
bool signal_group_of(const GroupLeader& leader, int pidfd, int sig);

/// A process group this process made or was told of, with its leader's pidfd while one is held.
/// Movable, not copyable: it closes its pidfd.
class OwnGroup {
 public:
  OwnGroup() = default;
  /// The group led by `pid`, a child of this process that leads its own group and has not been
  /// reaped (so the pid is still the child's): call it right after fork.
  static OwnGroup of_child(pid_t pid);
  /// The group led by `leader`, a process this one does not reap (a shim's rank on this host): a
  /// pidfd is held when the pid's process still has the recorded start time.
  static OwnGroup of_leader(const GroupLeader& leader);
  ~OwnGroup();
  OwnGroup(OwnGroup&& other) noexcept;
  OwnGroup& operator=(OwnGroup&& other) noexcept;
  OwnGroup(const OwnGroup&) = delete;
  OwnGroup& operator=(const OwnGroup&) = delete;

  pid_t pgid() const { return leader_.pid; }
  const GroupLeader& leader() const { return leader_; }
  int pidfd() const { return pidfd_; }
  /// Sends `sig` to the group when signal_group_of allows it; true when sent.
  bool signal(int sig) const;

 private:
  GroupLeader leader_;
  int pidfd_ = -1;
};

/// The process groups one launch made, by group id. Each goes under `guardian`'s watch when added
/// (launcher/process/guardian.h; none for the rank shim) and leaves it when forgotten.
class OwnGroups {
 public:
  explicit OwnGroups(Guardian* guardian = nullptr) : guardian_(guardian) {}
  OwnGroups(const OwnGroups&) = delete;
  OwnGroups& operator=(const OwnGroups&) = delete;

  /// Holds `group` (a group of the same id held before is forgotten first).
  void add(OwnGroup group);
  /// Sends `sig` to group `pgid` when it is one of these and signal_group_of allows it; true when
  /// sent. A group not held here is never signalled.
  bool signal(pid_t pgid, int sig) const;
  /// Group `pgid` has ended (its leader reaped, its leftovers killed): its pidfd is closed, the
  /// guardian forgets it, and it is never signalled again.
  void forget(pid_t pgid);
  /// Whether group `pgid` is held.
  bool holds(pid_t pgid) const { return groups_.count(pgid) != 0; }

 private:
  Guardian* guardian_;
  std::map<pid_t, OwnGroup> groups_;
};

}  // namespace nano
