#include "runtime/folder_claim/folder_claim.h"

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
  s << "job " << owner.job << "\nhost " << owner.host << "\nmachine " << owner.machine << "\npid " << owner.pid
    << "\nstart " << owner.start_ticks << "\nsince " << owner.since << "\nbeat " << owner.beat << "\n";
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
      if (key == "machine") o.machine = value, seen |= 64;
    }
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (seen != 127 || o.job.empty() || o.host.empty() || o.pid <= 0) return std::nullopt;
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

ClaimVerdict judge_claim(const std::optional<FolderOwner>& existing, const ClaimFacts& facts, const std::string& job,
                         const ClaimTimings& timings) {
  if (!existing) return ClaimVerdict::kFree;
  if (existing->job == job) return ClaimVerdict::kOurs;
  // A holder whose pid can be looked at: it runs or it does not (a stopped job still runs).
  if (facts.owner_running) return *facts.owner_running ? ClaimVerdict::kHeldByOther : ClaimVerdict::kStale;
  // Another machine's: alive while its heartbeat counter moves; gone when it stood still for the
  // whole watch, on this taker's clock.
  if (facts.beat_moved) return ClaimVerdict::kHeldByOther;
  return facts.watched >= timings.stale_after ? ClaimVerdict::kStale : ClaimVerdict::kWatch;
}

bool same_machine(const FolderOwner& owner, const FolderOwner& me) {
  return owner.host == me.host && owner.machine == me.machine;
}

bool same_job_owner_gone(const ClaimFacts& facts) { return facts.owner_running && !*facts.owner_running; }

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

// This kernel's boot and this process's pid namespace: where a pid means this process.
std::string read_machine_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  std::getline(in, boot);
  struct stat st {};
  const unsigned long long ns = stat("/proc/self/ns/pid", &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
  return (boot.empty() ? "unknown" : boot) + "/" + std::to_string(ns);
}

bool running(int64_t pid, uint64_t start_ticks) {
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  const uint64_t now = start_ticks_of(pid);
  return now == 0 || start_ticks == 0 || now == start_ticks;  // unreadable: take it as running
}

// What reading a claim file found.
struct ClaimRead {
  bool present = false;  // a file is at the name (it may be no claim: a link, a FIFO, a part)
  int error = 0;         // it could not be read for another reason than its absence (errno)
  std::string text;
};

// A claim file's text: at most 4 KiB, never through a link, never from anything but a regular
// file (a FIFO planted at the name would block the reader), never blocking.
ClaimRead read_claim(const std::string& path) {
  ClaimRead r;
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return r;
    r.present = true;
    if (errno != ELOOP && errno != ENXIO) r.error = errno;  // a link, a FIFO: present, no claim
    return r;
  }
  r.present = true;
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return r;
  }
  char buffer[4097];
  size_t used = 0;
  for (;;) {
    const ssize_t n = read(fd, buffer + used, sizeof buffer - used);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) r.error = errno;
    if (n <= 0) break;
    used += static_cast<size_t>(n);
    if (used == sizeof buffer) break;
  }
  close(fd);
  r.text.assign(buffer, used);
  return r;
}

// The names in `dir`; nullopt (and `error` set) when it cannot be read.
std::optional<std::vector<std::string>> names_in(const std::string& dir, int& error) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (!d) {
    error = errno;
    return std::nullopt;
  }
  while (dirent* e = readdir(d)) names.emplace_back(e->d_name);
  closedir(d);
  return names;
}

// The live claim of `dir`: its generation (0 = none) and what it says; `error` when the folder
// or that claim could not be read (then nothing is known of it).
struct LiveClaim {
  uint64_t generation = 0;
  std::optional<FolderOwner> owner;
  bool file = false;  // a claim file is there (it may not be a whole claim)
  int error = 0;
  std::vector<uint64_t> older;
};

LiveClaim live_claim(const std::string& dir) {
  LiveClaim live;
  const auto names = names_in(dir, live.error);
  if (!names) return live;
  const std::vector<uint64_t> generations = claim_generations(*names);
  if (generations.empty()) return live;
  live.generation = generations.front();
  live.older.assign(generations.begin() + 1, generations.end());
  const ClaimRead read = read_claim(dir + "/" + owner_file_name(live.generation));
  live.file = read.present;
  live.error = read.error;
  if (!read.error) live.owner = parse_owner(read.text);
  return live;
}

std::string unreadable_message(const std::string& dir, int error) {
  return "nano: cannot read the claim of checkpoint folder " + dir + ": " + strerror(error);
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
          read_machine_id(),
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

ClaimFacts facts_on_this_machine(const FolderOwner& owner, const FolderOwner& me) {
  ClaimFacts f;
  if (same_machine(owner, me)) f.owner_running = running(owner.pid, owner.start_ticks);
  return f;
}

}  // namespace

std::string machine_id() { return read_machine_id(); }

std::string checkpoint_job_id() {
  if (const char* v = std::getenv(contract::kCheckpointJob); v && *v) return v;
  // nano-run's run id only (it also sets NANO_JOB_ID): another launcher's is the user's choice
  // (torchrun's default "none" is every job's), which two live jobs may share.
  const char* job = std::getenv(contract::kJobId);
  if (const char* v = std::getenv("TORCHELASTIC_RUN_ID"); job && *job && v && *v && std::string(v) != "none") return v;
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
      if (live.error) continue;  // nothing known this time (too many open files, say): the next beat
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
    if (live.error) throw UsageError(unreadable_message(dir, live.error));
    ClaimFacts facts = live.owner ? facts_on_this_machine(*live.owner, s.me) : ClaimFacts{};
    if (live.owner && !facts.owner_running) {
      if (!watched || watched_generation != live.generation || watched->job != live.owner->job) {
        watched = live.owner;  // a new claim to watch: from now on this clock
        watched_generation = live.generation;
        watch_start = Clock::now();
      }
      facts.watched = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - watch_start);
      facts.beat_moved = live.owner->beat != watched->beat;
    }
    switch (judge_claim(live.owner, facts, s.me.job, timings)) {
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
        if (!same_job_owner_gone(facts)) return;  // the launching process holds it
        break;                                    // this job's earlier attempt: take its place quietly
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
  int error = 0;
  if (const auto names = names_in(dir, error))
    for (uint64_t g : claim_generations(*names))
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
  const ClaimRead read = read_claim(s.path());
  if (!read.error && same_holder(parse_owner(read.text), s.me)) unlink(s.path().c_str());
}

bool FolderClaim::holds() const { return state_->holds; }

void FolderClaim::check() const { check_claim_of_job(state_->dir, state_->me.job); }

void check_folder_claim(const std::string& dir) {
  const LiveClaim live = live_claim(dir);
  if (!live.owner) return;
  const FolderOwner me = myself();
  if (judge_claim(live.owner, facts_on_this_machine(*live.owner, me), me.job) == ClaimVerdict::kHeldByOther)
    throw UsageError(held_message(dir, *live.owner));
}

void check_claim_of_job(const std::string& dir, const std::string& job) {
  const LiveClaim live = live_claim(dir);
  if (live.error) throw ClaimUnreadable(unreadable_message(dir, live.error));
  if (!live.owner || live.owner->job != job) throw Error(lost_message(dir, live.owner));
}

}  // namespace nano
