#include "runtime/folder_claim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include <nano/error.h>
#include "core/job_secret.h"
#include "core/rank_contract.h"

namespace nano {

std::string format_owner(const FolderOwner& owner) {
  std::ostringstream s;
  s << "job " << owner.job << "\nhost " << owner.host << "\npid " << owner.pid << "\nstart " << owner.start_ticks
    << "\nsince " << owner.since << "\nbeat " << owner.beat << "\n";
  return s.str();
}

std::optional<FolderOwner> parse_owner(const std::string& text) {
  if (text.size() > 4096) return std::nullopt;  // no claim is that long
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
      if (key == "beat") o.beat = std::stoull(value), seen |= 32;
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (seen != 63 || o.job.empty() || o.host.empty() || o.pid <= 0) return std::nullopt;
  return o;
}

std::string owner_file_name(uint64_t generation) { return kOwnerPrefix + std::to_string(generation); }

std::optional<uint64_t> generation_of(const std::string& name) {
  const std::string prefix = kOwnerPrefix;
  if (name.size() <= prefix.size() || name.size() > prefix.size() + 18 || name.compare(0, prefix.size(), prefix) != 0)
    return std::nullopt;
  const std::string digits = name.substr(prefix.size());
  if (digits[0] == '0' || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoull(digits);
}

std::vector<uint64_t> claim_generations(const std::vector<std::string>& names) {
  std::vector<uint64_t> out;
  for (const auto& name : names)
    if (const auto g = generation_of(name)) out.push_back(*g);
  std::sort(out.rbegin(), out.rend());
  return out;
}

namespace {

// A holder of this host that no longer runs, or of another host whose heartbeat stood still for
// the whole watch.
bool owner_gone(const FolderOwner& existing, const ClaimFacts& facts, const std::string& host,
                const ClaimTimings& timings) {
  if (existing.host == host && facts.owner_running) return !*facts.owner_running;
  return !facts.beat_moved && facts.watched >= timings.stale_after;
}

}  // namespace

ClaimVerdict judge_claim(const std::optional<FolderOwner>& existing, const ClaimFacts& facts, const std::string& job,
                         const std::string& host, const ClaimTimings& timings) {
  if (!existing) return ClaimVerdict::kFree;
  if (existing->job == job) return ClaimVerdict::kOurs;
  if (existing->host == host && facts.owner_running)
    return *facts.owner_running ? ClaimVerdict::kHeldByOther : ClaimVerdict::kStale;
  if (facts.beat_moved) return ClaimVerdict::kHeldByOther;
  return owner_gone(*existing, facts, host, timings) ? ClaimVerdict::kStale : ClaimVerdict::kWatch;
}

bool same_job_owner_gone(const FolderOwner& existing, const ClaimFacts& facts, const std::string& host) {
  return existing.host == host && facts.owner_running && !*facts.owner_running;
}

namespace {

using Clock = std::chrono::steady_clock;

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

// A claim file's text: at most 4 KiB, never through a link (another user's planted symlink).
std::optional<std::string> read_claim(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buffer[4097];
  size_t used = 0;
  for (;;) {
    const ssize_t n = read(fd, buffer + used, sizeof buffer - used);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    used += static_cast<size_t>(n);
    if (used == sizeof buffer) break;
  }
  close(fd);
  return std::string(buffer, used);
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) names.emplace_back(e->d_name);
    closedir(d);
  }
  return names;
}

// The live claim of `dir`: its generation (0 = none) and what it says.
struct LiveClaim {
  uint64_t generation = 0;
  std::optional<FolderOwner> owner;
  bool file = false;  // a claim file is there (it may not be a whole claim)
  std::vector<uint64_t> older;
};

LiveClaim live_claim(const std::string& dir) {
  LiveClaim live;
  const std::vector<uint64_t> generations = claim_generations(names_in(dir));
  if (generations.empty()) return live;
  live.generation = generations.front();
  live.older.assign(generations.begin() + 1, generations.end());
  const auto text = read_claim(dir + "/" + owner_file_name(live.generation));
  live.file = text.has_value();
  if (text) live.owner = parse_owner(*text);
  return live;
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
  return {checkpoint_job_id(),
          host_name(),
          static_cast<int64_t>(getpid()),
          start_ticks_of(getpid()),
          static_cast<int64_t>(time(nullptr)),
          0};
}

bool same_holder(const std::optional<FolderOwner>& a, const FolderOwner& b) {
  return a && a->job == b.job && a->host == b.host && a->pid == b.pid;
}

// A new file of `text` in `dir` under an unpredictable name, made O_EXCL, 0600: the caller
// links or renames it into place. Throws Error naming why.
std::string write_temporary(const std::string& dir, const std::string& text) {
  const std::string path = dir + "/.nano-owner-tmp-" + hex_of(make_challenge());
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) throw Error(strerror(errno));
  const ssize_t n = write(fd, text.data(), text.size());
  const int failed = n == static_cast<ssize_t>(text.size()) ? 0 : (n < 0 ? errno : ENOSPC);
  close(fd);
  if (failed != 0) {
    unlink(path.c_str());
    throw Error(strerror(failed));
  }
  return path;
}

ClaimFacts facts_on_this_host(const FolderOwner& owner, const std::string& host) {
  ClaimFacts f;
  if (owner.host == host) f.owner_running = running(owner.pid, owner.start_ticks);
  return f;
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

std::string lost_message(const std::string& dir, const std::optional<FolderOwner>& owner) {
  return "nano: this job lost checkpoint folder " + dir + " to " +
         (owner ? owner_words(*owner) : std::string("nobody (its claim file is gone or unreadable)")) +
         ": it stops writing there (two jobs must not share a checkpoint folder)";
}

struct FolderClaim::State {
  std::string dir;
  ClaimTimings timings;
  FolderOwner me;
  uint64_t generation = 0;  // the file this process holds (0: none)
  bool holds = false;
  std::mutex mutex;
  std::condition_variable wake;
  bool stop = false;
  std::thread heartbeat;

  std::string path() const { return dir + "/" + owner_file_name(generation); }

  // Rewrites the claim with the next count while it is still the live one; stops (saying so
  // once) when another job's generation has passed it. The Checkpointer finds that out too,
  // before its next write, and ends the job.
  void beat() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!wake.wait_for(lock, timings.beat_every, [this] { return stop; })) {
      const LiveClaim live = live_claim(dir);
      if (live.generation != generation || !same_holder(live.owner, me)) {
        if (!live.owner || live.owner->job != me.job)
          std::cerr << "nano: warning: " << lost_message(dir, live.owner) << std::endl;
        return;
      }
      ++me.beat;
      try {
        const std::string tmp = write_temporary(dir, format_owner(me));
        if (rename(tmp.c_str(), path().c_str()) != 0) unlink(tmp.c_str());
      } catch (const Error&) {
        // A full disk: the next beat tries again (a watcher tolerates six missed ones).
      }
    }
  }

  // Links a new claim at generation `next`; false when another taker got there first.
  bool take(uint64_t next) {
    std::string tmp;
    try {
      tmp = write_temporary(dir, format_owner(me));
    } catch (const Error& e) {
      throw UsageError("nano: cannot claim checkpoint folder " + dir + ": " + e.what());
    }
    const int rc = link(tmp.c_str(), (dir + "/" + owner_file_name(next)).c_str());
    const int why = errno;
    unlink(tmp.c_str());
    if (rc != 0 && why != EEXIST)
      throw UsageError("nano: cannot claim checkpoint folder " + dir + ": " + strerror(why));
    if (rc != 0) return false;
    generation = next;
    holds = true;
    return true;
  }
};

FolderClaim::FolderClaim(const std::string& dir, ClaimTimings timings) : state_(std::make_shared<State>()) {
  State& s = *state_;
  s.dir = dir;
  s.timings = timings;
  s.me = myself();
  // Each round looks at the live claim and either takes the next generation or decides; a round
  // repeats when another taker won a generation between the look and the link.
  std::optional<FolderOwner> watched;
  uint64_t watched_generation = 0;
  Clock::time_point watch_start{};
  bool said_watching = false;
  // Bounded by the races lost (each one a generation another taker won meanwhile), not by the
  // rounds of a watch, which its own clock bounds.
  int races_lost = 0;
  while (!s.holds && races_lost < 100) {
    const LiveClaim live = live_claim(dir);
    ClaimFacts facts = live.owner ? facts_on_this_host(*live.owner, s.me.host) : ClaimFacts{};
    if (live.owner && live.owner->host != s.me.host) {
      if (!watched || watched_generation != live.generation || watched->job != live.owner->job) {
        watched = live.owner;  // a new claim to watch: from now on this clock
        watched_generation = live.generation;
        watch_start = Clock::now();
      }
      facts.watched = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - watch_start);
      facts.beat_moved = live.owner->beat != watched->beat;
    }
    switch (judge_claim(live.owner, facts, s.me.job, s.me.host, timings)) {
      case ClaimVerdict::kHeldByOther: throw UsageError(held_message(dir, *live.owner));
      case ClaimVerdict::kWatch:
        if (!said_watching) {
          std::cerr << "nano: checkpoint folder " << dir << " is claimed by " << owner_words(*live.owner)
                    << " on another host: watching its heartbeat for up to " << timings.stale_after.count() / 1000.0
                    << " s" << std::endl;
          said_watching = true;
        }
        std::this_thread::sleep_for(timings.look_every);
        continue;
      case ClaimVerdict::kOurs:
        if (!same_job_owner_gone(*live.owner, facts, s.me.host)) return;  // the launching process holds it
        break;  // this job's earlier attempt: take its place quietly
      case ClaimVerdict::kStale:
        if (s.take(live.generation + 1))
          std::cerr << "nano: checkpoint folder " << dir << ": taking over the claim of " << owner_words(*live.owner)
                    << ", which is gone" << std::endl;
        else
          ++races_lost;
        continue;
      case ClaimVerdict::kFree:
        if (!s.take(live.generation + 1))
          ++races_lost;
        else if (live.file)  // a claim file that no live owner wrote
          std::cerr << "nano: checkpoint folder " << dir << ": replacing an unreadable claim file" << std::endl;
        continue;
    }
    if (!s.take(live.generation + 1)) ++races_lost;
  }
  if (!s.holds) throw UsageError("nano: cannot claim checkpoint folder " + dir + ": other jobs keep replacing it");
  // The generations below ours are claims of the past: gone with their owners.
  for (uint64_t g : claim_generations(names_in(dir)))
    if (g < s.generation) unlink((dir + "/" + owner_file_name(g)).c_str());
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
  // Only this process writes its generation's name: what is there is ours, or nothing.
  const auto text = read_claim(s.path());
  if (text && same_holder(parse_owner(*text), s.me)) unlink(s.path().c_str());
}

bool FolderClaim::holds() const { return state_->holds; }

void FolderClaim::check() const { check_claim_of_job(state_->dir, state_->me.job); }

void check_folder_claim(const std::string& dir) {
  const LiveClaim live = live_claim(dir);
  if (!live.owner) return;
  const FolderOwner me = myself();
  if (judge_claim(live.owner, facts_on_this_host(*live.owner, me.host), me.job, me.host) == ClaimVerdict::kHeldByOther)
    throw UsageError(held_message(dir, *live.owner));
}

void check_claim_of_job(const std::string& dir, const std::string& job) {
  const LiveClaim live = live_claim(dir);
  if (!live.owner || live.owner->job != job) throw Error(lost_message(dir, live.owner));
}

}  // namespace nano
