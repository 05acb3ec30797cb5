// Signals reach only our own processes (launcher/process/process_group.h): the verdict against a fake
// process table, and the real case, a group leader's pid given to a stranger in a small pid
// namespace (root only), for the launcher's groups and for its guardian.
#include "launcher/process/process_group.h"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "launcher/process/guardian.h"
#include "launcher/supervise/supervision_io.h"

using namespace nano;

namespace {

// The processes of a fake host: pid -> start time (0: its stat cannot be read).
using ProcessTable = std::map<pid_t, unsigned long long>;

// What look_at_leader would see of `pid` on that host, with a pidfd that says `pidfd`.
LeaderSight sight_in(const ProcessTable& table, pid_t pid, PidfdSays pidfd) {
  LeaderSight sight;
  sight.pidfd = pidfd;
  const auto it = table.find(pid);
  sight.pid_in_use = it != table.end();
  if (sight.pid_in_use) sight.start_time = it->second;
  return sight;
}

}  // namespace

TEST_CASE("may_signal_group: our leader alive, or only our orphans left; never a stranger with its pid") {
  struct Row {
    const char* why;
    GroupLeader leader;
    PidfdSays pidfd;
    ProcessTable table;
    bool signal;
  };
  const std::vector<Row> table = {
      {"the leader runs (its pidfd says so)", {400, 9000}, PidfdSays::kAlive, {{400, 9000}}, true},
      {"the leader is a zombie not reaped yet", {400, 9000}, PidfdSays::kAlive, {{400, 9000}}, true},
      {"no pidfd: the pid's process has the leader's start time", {400, 9000}, PidfdSays::kNone, {{400, 9000}}, true},
      {"reaped, the pid free: only our orphans can hold the group", {400, 9000}, PidfdSays::kGone, {{401, 9100}}, true},
      {"no pidfd, the pid free", {400, 9000}, PidfdSays::kNone, {}, true},
      {"no pidfd, the leader's start time unknown, the pid free", {400, 0}, PidfdSays::kNone, {}, true},
      {"reaped, the pid taken by a stranger", {400, 9000}, PidfdSays::kGone, {{400, 9500}}, false},
      {"reaped, the pid taken in the same clock tick: the pidfd knows",
       {400, 9000},
       PidfdSays::kGone,
       {{400, 9000}},
       false},
      {"no pidfd, the pid taken by a stranger", {400, 9000}, PidfdSays::kNone, {{400, 9500}}, false},
      {"no pidfd, the pid's start time unreadable", {400, 9000}, PidfdSays::kNone, {{400, 0}}, false},
      {"no pidfd, the leader's start time unknown, the pid in use", {400, 0}, PidfdSays::kNone, {{400, 9000}}, false},
      {"no leader", {-1, 0}, PidfdSays::kNone, {}, false},
      {"pid 0 would be our own group", {0, 0}, PidfdSays::kNone, {}, false},
      {"pid 1 is init's", {1, 5}, PidfdSays::kAlive, {{1, 5}}, false},
  };
  for (const Row& row : table) {
    CAPTURE(row.why);
    CHECK(may_signal_group(row.leader, sight_in(row.table, row.leader.pid, row.pidfd)) == row.signal);
  }
}

TEST_CASE("process_start_time reads field 22 of /proc/PID/stat; a pidfd tells a reaped process") {
  std::ifstream stat("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  std::string after = text.substr(text.rfind(')') + 2);
  for (int field = 3; field < 22; ++field) after = after.substr(after.find(' ') + 1);
  CHECK(process_start_time(getpid()) == std::stoull(after.substr(0, after.find(' '))));
  CHECK(process_start_time(-1) == 0);
  CHECK(process_start_time(0) == 0);

  const pid_t child = fork();
  if (child == 0) {
    setpgid(0, 0);
    pause();
    _exit(0);
  }
  setpgid(child, child);
  OwnGroup group = OwnGroup::of_child(child);
  CHECK(group.pgid() == child);
  CHECK(group.leader().start_time == process_start_time(child));
  CHECK(look_at_leader(group.leader(), group.pidfd()).pid_in_use);
  if (group.pidfd() >= 0) CHECK(look_at_leader(group.leader(), group.pidfd()).pidfd == PidfdSays::kAlive);
  CHECK(group.signal(SIGKILL));
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WTERMSIG(status) == SIGKILL);
  if (group.pidfd() >= 0) CHECK(look_at_leader(group.leader(), group.pidfd()).pidfd == PidfdSays::kGone);
  CHECK_FALSE(group.signal(SIGKILL));  // no process is left in the group

  OwnGroups groups;
  CHECK_FALSE(groups.signal(getpid(), 0));  // not one of ours: never
  OwnGroup moved = std::move(group);
  groups.add(std::move(moved));
  CHECK(groups.holds(child));
  groups.forget(child);
  CHECK_FALSE(groups.holds(child));
}

namespace {

// ---- the real case, inside a pid namespace of its own (as root) ----

std::string failures;  // of the scenario running in the namespace

void fail(const std::string& what) { failures += what + "\n"; }

// The next process made in this pid namespace gets pid `pid`.
bool next_pid_is(pid_t pid) {
  std::ofstream last("/proc/sys/kernel/ns_last_pid");
  last << pid - 1;
  last.close();
  return static_cast<bool>(last);
}

// Waits to be killed, holding no descriptor: a launcher's end of its guardian's socket held by
// a child that never execs (a real rank execs) would keep the guardian from seeing its end.
[[noreturn]] void wait_to_be_killed() {
  for (int fd = 3; fd < 1024; ++fd) close(fd);
  for (;;) pause();
}

// A process that leads a group of its own and waits to be killed.
pid_t start_leader() {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    wait_to_be_killed();
  }
  setpgid(pid, pid);
  return pid;
}

// A leader that starts a member of its group, says its pid on `out`, and exits: the member holds
// the group's number afterwards, an orphan.
pid_t start_orphaning_leader(pid_t& member) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    const pid_t m = fork();
    if (m == 0) wait_to_be_killed();
    ssize_t ignored = write(fds[1], &m, sizeof m);
    (void)ignored;
    _exit(0);
  }
  setpgid(pid, pid);
  close(fds[1]);
  member = -1;
  if (read(fds[0], &member, sizeof member) != static_cast<ssize_t>(sizeof member)) member = -1;
  close(fds[0]);
  return pid;
}

bool running(pid_t pid) { return waitpid(pid, nullptr, WNOHANG) == 0; }

// Kills and reaps `pid`, our child, and says whether SIGKILL ended it.
bool reap_killed(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  return waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

// A group's leader is reaped and its pid goes to a stranger, which leads a group of its own;
// another leader's group is left to an orphan. The launcher's groups (by pidfd, and by start time
// alone) and the supervision loops' system calls leave the stranger alone and kill the orphan.
void launcher_scenario() {
  const pid_t leader = start_leader();
  OwnGroups groups;
  groups.add(OwnGroup::of_child(leader));
  const GroupLeader by_start_time = {leader, process_start_time(leader)};
  if (!reap_killed(leader)) fail("the leader did not end");
  // Start times count clock ticks: a pid given again starts at least one later (process_group.h).
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  if (!next_pid_is(leader)) return fail("cannot write ns_last_pid");
  const pid_t stranger = start_leader();
  if (stranger != leader) return fail("the stranger got pid " + std::to_string(stranger) + ", not the leader's");
  if (groups.signal(leader, SIGKILL)) fail("the launcher's groups signalled the stranger's group (by pidfd)");
  make_system_supervision_io(&groups)->signal_group(leader, SIGKILL);  // the supervision loops' way
  if (signal_group_of(by_start_time, -1, SIGKILL)) fail("signal_group_of signalled the stranger (by start time)");
  if (!running(stranger)) fail("the stranger was killed");
  reap_killed(stranger);

  pid_t member = -1;
  const pid_t orphaning = start_orphaning_leader(member);
  groups.add(OwnGroup::of_child(orphaning));
  waitpid(orphaning, nullptr, 0);
  if (member <= 0) return fail("no member of the orphaning leader's group");
  if (!groups.signal(orphaning, SIGKILL)) fail("the orphan's group was not signalled");
  int status = 0;
  // Orphans come to us, this namespace's first process.
  if (waitpid(member, &status, 0) != member || !WIFSIGNALED(status)) fail("the orphan did not end");
}

// The same for the guardian, when its launcher dies: two groups whose pids went to strangers (one
// watched with its leader's pidfd, one by start time alone) are left alone; an orphan's group goes.
void guardian_scenario() {
  int ready[2];
  if (pipe(ready) != 0) return fail("pipe");
  const pid_t launcher = fork();
  if (launcher == 0) {
    close(ready[0]);
    Guardian guardian;
    const pid_t a = start_leader(), b = start_leader();
    OwnGroups groups(&guardian);
    groups.add(OwnGroup::of_child(a));
    guardian.watch_group({b, process_start_time(b)});  // no pidfd: its start time decides
    pid_t member = -1;
    const pid_t orphaning = start_orphaning_leader(member);
    groups.add(OwnGroup::of_child(orphaning));
    kill(a, SIGKILL);
    kill(b, SIGKILL);
    for (pid_t p : {a, b, orphaning}) waitpid(p, nullptr, 0);
    const pid_t told[3] = {a, b, member};
    ssize_t ignored = write(ready[1], told, sizeof told);
    (void)ignored;
    for (;;) pause();
  }
  close(ready[1]);
  pid_t told[3] = {-1, -1, -1};
  if (read(ready[0], told, sizeof told) != static_cast<ssize_t>(sizeof told)) return fail("no word from the launcher");
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  std::vector<pid_t> strangers;
  for (pid_t p : {told[0], told[1]}) {
    if (!next_pid_is(p)) return fail("cannot write ns_last_pid");
    strangers.push_back(start_leader());
    if (strangers.back() != p)
      fail("a stranger got pid " + std::to_string(strangers.back()) + ", not " + std::to_string(p));
  }
  reap_killed(launcher);
  // The guardian acts, then exits; it and the orphan come to us.
  bool guardian_done = false, member_killed = false;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!(guardian_done && member_killed) && std::chrono::steady_clock::now() < until) {
    int status = 0;
    const pid_t ended = waitpid(-1, &status, WNOHANG);
    if (ended == told[2])
      member_killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    else if (ended == strangers[0] || ended == strangers[1])
      fail("the guardian killed stranger " + std::to_string(ended));
    else if (ended > 0)
      guardian_done = true;
    else
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!guardian_done) fail("the guardian did not end");
  if (!member_killed) fail("the guardian left the orphan's group alive");
  for (pid_t s : strangers) {
    if (!running(s)) fail("stranger " + std::to_string(s) + " is gone");
    reap_killed(s);
  }
}

// Runs `scenario` as the first process of a new pid namespace (with its own /proc); returns its
// failures, or nullopt where no namespace can be made (not root).
std::optional<std::string> in_pid_namespace(void (*scenario)()) {
  int out[2];
  REQUIRE(pipe(out) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(out[0]);
    if (unshare(CLONE_NEWPID | CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
      _exit(77);
    const pid_t first = fork();
    if (first == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (mount("proc", "/proc", "proc", 0, nullptr) != 0) _exit(77);
      scenario();
      ssize_t ignored = write(out[1], failures.data(), failures.size());
      (void)ignored;
      _exit(0);
    }
    int status = 0;
    waitpid(first, &status, 0);
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
  }
  close(out[1]);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(child, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) return std::nullopt;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) text += "the namespace's scenario did not end normally\n";
  return text;
}

}  // namespace

TEST_CASE("a reaped leader's pid given to a stranger: neither the launcher nor its guardian signals it") {
  for (void (*scenario)() : {launcher_scenario, guardian_scenario}) {
    const std::optional<std::string> failed = in_pid_namespace(scenario);
    if (!failed) {
      MESSAGE("skipped: no pid namespace here (needs root)");
      return;
    }
    CHECK(*failed == "");
  }
}
