#include "runtime/folder_claim.h"
#include "core/rank_contract.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include <nano/error.h>

namespace nano {

std::string format_owner(const FolderOwner& owner) {
  std::ostringstream s;
  s << "job " << owner.job << "\nhost " << owner.host << "\npid " << owner.pid << "\nstart " << owner.start_ticks
    << "\nsince " << owner.since << "\n";
  return s.str();
}

std::optional<FolderOwner> parse_owner(const std::string& text) {
  FolderOwner o;
  int seen = 0;
  std::istringstream in(text);
  std::string line;
  try {
    while (std::getline(in, line)) {
      const auto space = line.find(' ');
      if (space == std::string::npos) continue;
      const std::string key = line.substr(0, space), value = line.substr(space + 1);
      if (key == "job") o.job = value, seen |= 1;
      if (key == "host") o.host = value, seen |= 2;
      if (key == "pid") o.pid = std::stoll(value), seen |= 4;
      if (key == "start") o.start_ticks = std::stoull(value), seen |= 8;
      if (key == "since") o.since = std::stoll(value), seen |= 16;
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (seen != 31 || o.job.empty() || o.host.empty() || o.pid <= 0) return std::nullopt;
  return o;
}

namespace {

// A holder that is not running, or one of another host that stopped its heartbeat.
bool owner_gone(const FolderOwner& existing, const ClaimFacts& facts, const std::string& host) {
  if (existing.host == host && facts.owner_running) return !*facts.owner_running;
  return facts.heartbeat_age_s > static_cast<double>(kStaleAfter.count());
}

}  // namespace

ClaimVerdict judge_claim(const std::optional<FolderOwner>& existing, const ClaimFacts& facts, const std::string& job,
                         const std::string& host) {
  if (!existing) return ClaimVerdict::kFree;
  if (existing->job == job) return ClaimVerdict::kOurs;
  return owner_gone(*existing, facts, host) ? ClaimVerdict::kStale : ClaimVerdict::kHeldByOther;
}

bool same_job_owner_gone(const FolderOwner& existing, const ClaimFacts& facts, const std::string& host) {
  return owner_gone(existing, facts, host);
}

namespace {

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

// Field 22 of /proc/PID/stat (after the parenthesised command, which may hold spaces); 0 when
// unreadable.
uint64_t start_ticks_of(int64_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(text.substr(close + 2));  // from field 3, the state
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  return 0;
}

bool running(int64_t pid, uint64_t start_ticks) {
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  const uint64_t now = start_ticks_of(pid);
  return now == 0 || start_ticks == 0 || now == start_ticks;  // unreadable: take it as running
}

std::string read_text(const std::string& path, bool& exists) {
  std::ifstream in(path);
  exists = static_cast<bool>(in);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

ClaimFacts facts_of(const std::string& path, const FolderOwner& owner, const std::string& host) {
  ClaimFacts f;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    struct timespec now {};
    clock_gettime(CLOCK_REALTIME, &now);
    f.heartbeat_age_s = static_cast<double>(now.tv_sec - st.st_mtim.tv_sec) +
                        static_cast<double>(now.tv_nsec - st.st_mtim.tv_nsec) / 1e9;
  }
  if (owner.host == host) f.owner_running = running(owner.pid, owner.start_ticks);
  return f;
}

std::string utc_time(int64_t seconds) {
  const time_t t = static_cast<time_t>(seconds);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char text[32];
  strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

std::string owner_words(const FolderOwner& o) {
  return "job " + o.job + " (host " + o.host + ", pid " + std::to_string(o.pid) + ", since " + utc_time(o.since) + ")";
}

FolderOwner myself() {
  return {checkpoint_job_id(), host_name(), static_cast<int64_t>(getpid()), start_ticks_of(getpid()),
          static_cast<int64_t>(time(nullptr))};
}

bool same_holder(const std::optional<FolderOwner>& a, const FolderOwner& b) {
  return a && a->job == b.job && a->host == b.host && a->pid == b.pid;
}

void write_whole(const std::string& path, const std::string& text) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(strerror(errno));
  const ssize_t n = write(fd, text.data(), text.size());
  const int failed = n == static_cast<ssize_t>(text.size()) ? 0 : (n < 0 ? errno : ENOSPC);
  close(fd);
  if (failed != 0) {
    unlink(path.c_str());
    throw Error(strerror(failed));
  }
}

}  // namespace

std::string checkpoint_job_id() {
  // torchrun's run id defaults to "none" for every job: no identity at all.
  for (const char* name : {contract::kCheckpointJob, "TORCHELASTIC_RUN_ID"})
    if (const char* v = std::getenv(name); v && *v && std::string(v) != "none") return v;
  static const std::string own =
      host_name() + "-" + std::to_string(getpid()) + "-" + std::to_string(start_ticks_of(getpid()));
  return own;
}

std::string held_message(const std::string& dir, const FolderOwner& owner) {
  return "nano: checkpoint folder " + dir + " is in use by " + owner_words(owner) +
         ": stop that job or use another folder";
}

struct FolderClaim::State {
  std::string path;
  FolderOwner me;
  bool holds = false;
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread heartbeat;

  // Refreshes the claim's time while it is still ours; says once if another job replaced it.
  void beat() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!wake.wait_for(lock, kHeartbeatEvery, [this] { return stop; })) {
      bool exists = false;
      if (!same_holder(parse_owner(read_text(path, exists)), me)) {
        if (exists)
          std::cerr << "nano: warning: checkpoint folder claim " << path << " was replaced by another job" << std::endl;
        return;
      }
      utimensat(AT_FDCWD, path.c_str(), nullptr, 0);
    }
  }
};

FolderClaim::FolderClaim(const std::string& dir) : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.path = dir + "/" + kOwnerFile;
  s.me = myself();
  const std::string tmp = s.path + ".tmp-" + std::to_string(s.me.pid);
  // Three rounds: a claim may vanish (its owner released it) or be taken by another job between
  // our look and our move.
  for (int round = 0; round < 3 && !s.holds; ++round) {
    try {
      write_whole(tmp, format_owner(s.me));
    } catch (const Error& e) {
      throw UsageError("nano: cannot claim checkpoint folder " + dir + ": " + e.what());
    }
    if (link(tmp.c_str(), s.path.c_str()) == 0) {
      unlink(tmp.c_str());
      s.holds = true;
      break;
    }
    const int failed = errno;
    if (failed != EEXIST) {
      unlink(tmp.c_str());
      throw UsageError("nano: cannot claim checkpoint folder " + dir + ": " + strerror(failed));
    }
    bool exists = false;
    const std::string text = read_text(s.path, exists);
    if (!exists) {
      unlink(tmp.c_str());
      continue;  // released meanwhile: link again
    }
    const std::optional<FolderOwner> owner = parse_owner(text);
    const ClaimFacts facts = owner ? facts_of(s.path, *owner, s.me.host) : ClaimFacts{};
    switch (judge_claim(owner, facts, s.me.job, s.me.host)) {
      case ClaimVerdict::kHeldByOther: unlink(tmp.c_str()); throw UsageError(held_message(dir, *owner));
      case ClaimVerdict::kOurs:
        if (!same_job_owner_gone(*owner, facts, s.me.host)) {
          unlink(tmp.c_str());
          return;  // the job's launching process holds it and keeps it fresh
        }
        break;  // this job's earlier attempt: take its place quietly
      case ClaimVerdict::kStale:
        std::cerr << "nano: checkpoint folder " << dir << ": taking over the claim of " << owner_words(*owner)
                  << ", which is gone" << std::endl;
        break;
      case ClaimVerdict::kFree:  // a claim file that is not a whole claim: no live owner wrote it
        std::cerr << "nano: checkpoint folder " << dir << ": replacing an unreadable claim file" << std::endl;
        break;
    }
    if (rename(tmp.c_str(), s.path.c_str()) != 0) {
      const int why = errno;
      unlink(tmp.c_str());
      throw UsageError("nano: cannot claim checkpoint folder " + dir + ": " + strerror(why));
    }
    // Two takers of one stale claim: the later rename wins; the earlier sees it and goes round.
    s.holds = same_holder(parse_owner(read_text(s.path, exists)), s.me);
  }
  if (!s.holds) throw UsageError("nano: cannot claim checkpoint folder " + dir + ": other jobs keep replacing it");
  s.heartbeat = std::thread([state = state_] { state->beat(); });
}

FolderClaim::~FolderClaim() {
  State& s = *state_;
  if (!s.holds) return;
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    s.stop = true;
  }
  s.wake.notify_all();
  if (s.heartbeat.joinable()) s.heartbeat.join();
  bool exists = false;
  if (same_holder(parse_owner(read_text(s.path, exists)), s.me)) unlink(s.path.c_str());
}

bool FolderClaim::holds() const { return state_->holds; }

void check_folder_claim(const std::string& dir) {
  const std::string path = dir + "/" + kOwnerFile;
  bool exists = false;
  const std::optional<FolderOwner> owner = parse_owner(read_text(path, exists));
  if (!owner) return;
  const FolderOwner me = myself();
  if (judge_claim(owner, facts_of(path, *owner, me.host), me.job, me.host) == ClaimVerdict::kHeldByOther)
    throw UsageError(held_message(dir, *owner));
}

}  // namespace nano
