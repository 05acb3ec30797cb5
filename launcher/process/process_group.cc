#include "launcher/process/process_group.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <utility>

#include "launcher/process/guardian.h"

// The same numbers on every architecture since Linux 5.1 unified them; older headers lack them.
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace nano {

bool may_signal_group(const GroupLeader& leader, const LeaderSight& now) {
  if (leader.pid <= 1) return false;  // killpg(0) is our own group, 1 is init's
  if (now.pidfd == PidfdSays::kAlive) return true;
  if (!now.pid_in_use) return true;  // only our orphans can still hold the number
  if (now.pidfd == PidfdSays::kGone) return false;
  return leader.start_time != 0 && now.start_time == leader.start_time;
}

unsigned long long process_start_time(pid_t pid) {
  if (pid <= 0) return 0;
  // "/proc/<pid>/stat", written by hand: snprintf is not async-signal-safe.
  char path[32] = "/proc/";
  char digits[16];
  int n = 0;
  for (long v = pid; v > 0 && n < 15; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  int at = 6;
  while (n > 0) path[at++] = digits[--n];
  for (const char* tail = "/stat"; *tail;) path[at++] = *tail++;
  path[at] = 0;
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[1024];
  size_t used = 0;
  for (;;) {
    const ssize_t got = read(fd, text + used, sizeof text - 1 - used);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    used += static_cast<size_t>(got);
    if (used == sizeof text - 1) break;
  }
  close(fd);
  text[used] = 0;
  // "pid (comm) state ppid ...": the command may hold spaces and ')', so count from the last ')'.
  size_t close_paren = used;
  for (size_t i = 0; i < used; ++i)
    if (text[i] == ')') close_paren = i;
  if (close_paren == used) return 0;
  // The space after ')' opens field 3 (state): field 22 follows the 20th space from there.
  size_t i = close_paren + 1;
  for (int spaces = 0; i < used && spaces < 20; ++i)
    if (text[i] == ' ') ++spaces;
  unsigned long long start = 0;
  bool any = false;
  for (; i < used && text[i] >= '0' && text[i] <= '9'; ++i) {
    start = start * 10 + static_cast<unsigned long long>(text[i] - '0');
    any = true;
  }
  return any ? start : 0;
}

int open_pidfd(pid_t pid) {
  if (pid <= 0) return -1;
  return static_cast<int>(syscall(SYS_pidfd_open, pid, 0U));  // close-on-exec, always
}

bool signal_through_pidfd(int pidfd, int sig) {
  return pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0U) == 0;
}

LeaderSight look_at_leader(const GroupLeader& leader, int pidfd) {
  LeaderSight sight;
  if (pidfd >= 0) {
    if (syscall(SYS_pidfd_send_signal, pidfd, 0, nullptr, 0U) == 0) {
      sight.pidfd = PidfdSays::kAlive;
      sight.pid_in_use = true;  // by the leader itself: nothing more to look at
      return sight;
    }
    if (errno == ESRCH) sight.pidfd = PidfdSays::kGone;
  }
  if (leader.pid <= 0) return sight;
  sight.pid_in_use = kill(leader.pid, 0) == 0 || errno != ESRCH;
  if (sight.pid_in_use) sight.start_time = process_start_time(leader.pid);
  return sight;
}

bool signal_group_of(const GroupLeader& leader, int pidfd, int sig) {
  if (!may_signal_group(leader, look_at_leader(leader, pidfd))) return false;
  return killpg(leader.pid, sig) == 0;
}

OwnGroup OwnGroup::of_child(pid_t pid) {
  OwnGroup group;
  group.leader_ = {pid, process_start_time(pid)};
  group.pidfd_ = open_pidfd(pid);
  return group;
}

OwnGroup OwnGroup::of_leader(const GroupLeader& leader) {
  OwnGroup group;
  group.leader_ = leader;
  // Opened first, then checked: a pidfd of a process with the recorded start time is the leader's.
  const int fd = open_pidfd(leader.pid);
  if (fd >= 0 && (leader.start_time == 0 || process_start_time(leader.pid) != leader.start_time))
    close(fd);
  else
    group.pidfd_ = fd;
  return group;
}

OwnGroup::~OwnGroup() {
  if (pidfd_ >= 0) close(pidfd_);
}

OwnGroup::OwnGroup(OwnGroup&& other) noexcept : leader_(other.leader_), pidfd_(std::exchange(other.pidfd_, -1)) {}

OwnGroup& OwnGroup::operator=(OwnGroup&& other) noexcept {
  if (this != &other) {
    if (pidfd_ >= 0) close(pidfd_);
    leader_ = other.leader_;
    pidfd_ = std::exchange(other.pidfd_, -1);
  }
  return *this;
}

bool OwnGroup::signal(int sig) const { return signal_group_of(leader_, pidfd_, sig); }

void OwnGroups::add(OwnGroup group) {
  const pid_t pgid = group.pgid();
  if (pgid <= 1) return;
  if (holds(pgid)) forget(pgid);
  if (guardian_) guardian_->watch_group(group.leader(), group.pidfd());
  groups_.emplace(pgid, std::move(group));
}

bool OwnGroups::signal(pid_t pgid, int sig) const {
  const auto it = groups_.find(pgid);
  return it != groups_.end() && it->second.signal(sig);
}

void OwnGroups::forget(pid_t pgid) {
  const auto it = groups_.find(pgid);
  if (it == groups_.end()) return;
  if (guardian_) guardian_->forget_group(pgid);
  groups_.erase(it);
}

}  // namespace nano
