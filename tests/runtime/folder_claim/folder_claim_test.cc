// One owner per checkpoint folder: the pure verdict as a table, then the claim file in a real
// folder (another host's live and silent claims, a dead owner on this host, this job's own), and
// the refusal through prepare_checkpoint_dir and Checkpointer.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nano/checkpoint.h>
#include <nano/communicator.h>
#include <nano/error.h>
#include "runtime/folder_claim/folder_claim.h"
#include "tests/common/error_of.h"
#include "tests/common/stderr_capture.h"

#include <doctest/doctest.h>

namespace {

using nano::ClaimFacts;
using nano::ClaimVerdict;
using nano::FolderOwner;
using nano::test::stderr_of;

std::string temp_dir() {
  char tmpl[] = "/tmp/nano_folder_claim_test_XXXXXX";
  return mkdtemp(tmpl);
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// Sets a file's modification time `seconds` into the past.
void age(const std::string& path, int seconds) {
  struct timespec times[2];
  clock_gettime(CLOCK_REALTIME, &times[0]);
  times[0].tv_sec -= seconds;
  times[1] = times[0];
  REQUIRE(utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

std::string host() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// A pid that ran and is gone (reaped).
int64_t dead_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

// Reaps `pid` within `seconds`; SIGKILLs it and says false when it did not end by then.
bool wait_bounded(pid_t pid, int seconds) {
  for (int i = 0; i < seconds * 50; ++i) {
    if (waitpid(pid, nullptr, WNOHANG) == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return false;
}

using nano::test::error_of;

// The claim generations left in `dir`.
std::vector<uint64_t> claim_generations_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) names.emplace_back(e->d_name);
    closedir(d);
  }
  return nano::claim_generations(names);
}

const FolderOwner kOther{"job-b", "hostB", "boot-b/4026531836", 4242, 77, 1764672000, 3};  // 2025-12-02 10:40:00 UTC

// Short clocks, so that watching another host's claim takes a moment, not 30 s.
const nano::ClaimTimings kQuick{std::chrono::milliseconds(100), std::chrono::milliseconds(600),
                                std::chrono::milliseconds(20)};

std::string claim_file(const std::string& dir, uint64_t generation) {
  return dir + "/" + nano::owner_file_name(generation);
}

}  // namespace

TEST_CASE("folder claim: the verdict for every kind of existing claim") {
  using std::chrono::milliseconds;
  struct Row {
    const char* what;
    std::optional<FolderOwner> existing;
    ClaimFacts facts;
    ClaimVerdict verdict;
  };
  const FolderOwner other_job{"job-b", "hostA", "boot-a/1", 4242, 77, 0, 0};
  const FolderOwner ours{"job-a", "hostB", "boot-b/1", 4242, 77, 0, 0};
  const Row rows[] = {
      {"no claim", std::nullopt, {}, ClaimVerdict::kFree},
      {"another machine, not watched yet", kOther, {std::nullopt, milliseconds(0), false}, ClaimVerdict::kWatch},
      {"another machine, watched 29 s, still",
       kOther,
       {std::nullopt, milliseconds(29000), false},
       ClaimVerdict::kWatch},
      {"another machine, its beat moved", kOther, {std::nullopt, milliseconds(200), true}, ClaimVerdict::kHeldByOther},
      {"another machine, still for 30 s", kOther, {std::nullopt, milliseconds(30000), false}, ClaimVerdict::kStale},
      {"another machine, moved at 31 s", kOther, {std::nullopt, milliseconds(31000), true}, ClaimVerdict::kHeldByOther},
      // Its pid looked at: a stopped job still runs and owns it; its clock is never looked at.
      {"this machine, running", other_job, {true, milliseconds(0), false}, ClaimVerdict::kHeldByOther},
      {"this machine, gone", other_job, {false, milliseconds(0), false}, ClaimVerdict::kStale},
      {"this job, anywhere", ours, {false, milliseconds(0), false}, ClaimVerdict::kOurs},
  };
  for (const Row& r : rows) {
    CAPTURE(r.what);
    CHECK(nano::judge_claim(r.existing, r.facts, "job-a") == r.verdict);
  }
  // Of this job's claims, only a gone owner whose pid was looked at passes on (a restarted rank
  // replacing its predecessor); another machine's (the launching process) stays its own.
  CHECK(nano::same_job_owner_gone({false, milliseconds(0), false}));
  CHECK_FALSE(nano::same_job_owner_gone({true, milliseconds(0), false}));
  CHECK_FALSE(nano::same_job_owner_gone({}));
  // A pid is looked at only on the same host name, kernel and pid namespace: two containers of
  // one host name (another pid namespace) are two machines.
  const FolderOwner me{"job-a", "hostA", "boot-a/1", 1, 1, 0, 0};
  CHECK(nano::same_machine(other_job, me));
  CHECK_FALSE(nano::same_machine({"job-b", "hostA", "boot-a/2", 1, 1, 0, 0}, me));  // another pid namespace
  CHECK_FALSE(nano::same_machine({"job-b", "hostA", "boot-z/1", 1, 1, 0, 0}, me));  // another kernel
  CHECK_FALSE(nano::same_machine({"job-b", "hostB", "boot-a/1", 1, 1, 0, 0}, me));  // another host name
}

TEST_CASE("folder claim: the names of the generations") {
  CHECK(nano::owner_file_name(1) == ".nano-owner.1");
  CHECK(nano::owner_file_name(12) == ".nano-owner.12");
  struct Row {
    const char* name;
    std::optional<uint64_t> generation;
  };
  const Row rows[] = {{".nano-owner.1", 1},
                      {".nano-owner.42", 42},
                      {".nano-owner.", std::nullopt},
                      {".nano-owner", std::nullopt},
                      {".nano-owner.01", std::nullopt},
                      {".nano-owner.1x", std::nullopt},
                      {".nano-owner.-1", std::nullopt},
                      {".nano-owner.1234567890123456789", std::nullopt},
                      {"ckpt-000000000001.nano", std::nullopt},
                      {".nano-owner-tmp-ab", std::nullopt}};
  for (const Row& r : rows) {
    CAPTURE(r.name);
    CHECK(nano::generation_of(r.name) == r.generation);
  }
  CHECK(nano::claim_generations({"a", ".nano-owner.3", ".nano-owner.10", ".nano-owner.x", ".nano-owner.2"}) ==
        std::vector<uint64_t>{10, 3, 2});
}

TEST_CASE("folder claim: the file reads back; a partial one is no claim") {
  const std::string text = nano::format_owner(kOther);
  CHECK(text == "job job-b\nhost hostB\nmachine boot-b/4026531836\npid 4242\nstart 77\nsince 1764672000\nbeat 3\n");
  const auto back = nano::parse_owner(text);
  REQUIRE(back);
  CHECK(back->job == "job-b");
  CHECK(back->host == "hostB");
  CHECK(back->pid == 4242);
  CHECK(back->start_ticks == 77);
  CHECK(back->since == 1764672000);
  CHECK(back->beat == 3);
  CHECK(back->machine == "boot-b/4026531836");
  CHECK_FALSE(nano::parse_owner(text.substr(0, 30)));
  CHECK_FALSE(nano::parse_owner("job x\nhost y\nmachine m\npid nope\nstart 1\nsince 1\nbeat 0\n"));
  CHECK_FALSE(nano::parse_owner("job x\nhost y\npid 1\nstart 1\nsince 1\nbeat 0\n"));  // no machine
  CHECK_FALSE(nano::parse_owner(""));
  CHECK_FALSE(nano::parse_owner(text + std::string(5000, 'x')));  // no claim is that long
}

TEST_CASE("folder claim: held while alive, refused to another job, released at the end") {
  const std::string dir = temp_dir();
  const std::string file = claim_file(dir, 1);
  {
    nano::FolderClaim claim(dir);
    CHECK(claim.holds());
    const auto owner = nano::parse_owner(read(file));
    REQUIRE(owner);
    CHECK(owner->pid == getpid());
    CHECK(owner->host == host());
    CHECK(owner->job == nano::checkpoint_job_id());
    struct stat st {};
    REQUIRE(stat(file.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK_NOTHROW(claim.check());
    {
      nano::FolderClaim again(dir);  // the same job, its owner running: kept as it is
      CHECK_FALSE(again.holds());
      CHECK_NOTHROW(again.check());
    }
    CHECK(nano::parse_owner(read(file)));
    // Another job of this host, while this one runs.
    setenv("NANO_CHECKPOINT_JOB", "someone-else", 1);
    const std::string refused = stderr_of([&] { nano::FolderClaim other(dir); });
    CHECK(refused.find("|nano: checkpoint folder " + dir + " is in use by job " + owner->job + " (host " + host() +
                       ", pid " + std::to_string(getpid()) + ", since ") == 0);
    CHECK(refused.find(" UTC): stop that job or use another folder") != std::string::npos);
    CHECK(stderr_of([&] { nano::prepare_checkpoint_dir(dir); }) == refused);
    unsetenv("NANO_CHECKPOINT_JOB");
  }
  CHECK_FALSE(std::ifstream(file).good());  // released
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("folder claim: another host's claim is refused while it beats and taken over once still") {
  const std::string dir = temp_dir();
  const std::string file = claim_file(dir, 4);
  write(file, nano::format_owner(kOther));
  const std::string watching = "nano: checkpoint folder " + dir +
                               " is claimed by job job-b (host hostB, pid 4242, since 2025-12-02 10:40:00 UTC) on "
                               "another host: watching its heartbeat for up to 0.6 s\n";
  const std::string held = "|nano: checkpoint folder " + dir +
                           " is in use by job job-b (host hostB, pid 4242, since 2025-12-02 10:40:00 UTC): stop that "
                           "job or use another folder";
  // Its holder beats (the counter moves) while this taker watches: refused. The file's time says
  // nothing: an old one that beats is alive.
  {
    std::atomic<bool> stop{false};
    std::thread beating([&] {
      FolderOwner o = kOther;
      while (!stop) {
        ++o.beat;
        write(file + ".next", nano::format_owner(o));
        std::rename((file + ".next").c_str(), file.c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    });
    age(file, 3600);
    CHECK(stderr_of([&] { nano::FolderClaim c(dir, kQuick); }) == watching + held);
    stop = true;
    beating.join();
  }
  // A claim checked before anything is made, by a Checkpointer or prepare_checkpoint_dir, is not
  // refused for another host's claim: taking it is the claim's to decide, by watching.
  CHECK_NOTHROW(nano::check_folder_claim(dir));
  // Still for the whole watch, however new the file: taken over at the next generation.
  std::optional<nano::FolderClaim> claim;
  CHECK(stderr_of([&] { claim.emplace(dir, kQuick); }) ==
        watching + "nano: checkpoint folder " + dir +
            ": taking over the claim of job job-b (host hostB, pid 4242, since 2025-12-02 10:40:00 UTC), which is "
            "gone\n");
  CHECK(claim->holds());
  CHECK_FALSE(std::ifstream(file).good());  // the generation it replaced is gone
  CHECK(nano::parse_owner(read(claim_file(dir, 5)))->pid == getpid());
  claim.reset();
  CHECK_FALSE(std::ifstream(claim_file(dir, 5)).good());
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("folder claim: a dead owner on this host is replaced at once; this job's, quietly") {
  const std::string dir = temp_dir();
  const int64_t gone = dead_pid();
  write(claim_file(dir, 1), nano::format_owner({"job-c", host(), nano::machine_id(), gone, 5, 1764672000, 0}));
  std::optional<nano::FolderClaim> claim;
  CHECK(stderr_of([&] { claim.emplace(dir); }) ==
        "nano: checkpoint folder " + dir + ": taking over the claim of job job-c (host " + host() + ", pid " +
            std::to_string(gone) + ", since 2025-12-02 10:40:00 UTC), which is gone\n");
  CHECK(claim->holds());
  claim.reset();
  // A restart: this job's earlier attempt died holding the folder.
  write(claim_file(dir, 7),
        nano::format_owner({nano::checkpoint_job_id(), host(), nano::machine_id(), gone, 5, 1764672000, 9}));
  CHECK(stderr_of([&] { claim.emplace(dir); }).empty());
  CHECK(claim->holds());
  CHECK(nano::parse_owner(read(claim_file(dir, 8)))->pid == getpid());
  claim.reset();
  // A claim file that is not a whole claim (no live owner writes one) is replaced, said once; so
  // is a symbolic link planted at a claim's name (never followed).
  write(claim_file(dir, 2), "job x\n");
  CHECK(stderr_of([&] { claim.emplace(dir); }) ==
        "nano: checkpoint folder " + dir + ": replacing an unreadable claim file\n");
  claim.reset();
  REQUIRE(symlink("/etc/hostname", claim_file(dir, 9).c_str()) == 0);
  CHECK(stderr_of([&] { claim.emplace(dir); }) ==
        "nano: checkpoint folder " + dir + ": replacing an unreadable claim file\n");
  CHECK(claim->holds());
  CHECK(nano::parse_owner(read(claim_file(dir, 10))));
  claim.reset();
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("folder claim: the holder's heartbeat counter moves while it lives") {
  const std::string dir = temp_dir();
  nano::FolderClaim claim(dir, kQuick);
  const uint64_t first = nano::parse_owner(read(claim_file(dir, 1)))->beat;
  // Watched for up to 20 periods: a loaded machine may wake the heartbeat late.
  const auto deadline = std::chrono::steady_clock::now() + 20 * kQuick.beat_every;
  uint64_t seen = first;
  while (std::chrono::steady_clock::now() < deadline && seen < first + 2) {
    if (const auto o = nano::parse_owner(read(claim_file(dir, 1)))) seen = o->beat;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  CHECK(seen >= first + 2);
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("folder claim: a holder whose claim another job took finds out, and stops beating") {
  const std::string dir = temp_dir();
  nano::FolderClaim claim(dir, kQuick);
  CHECK_NOTHROW(claim.check());
  write(claim_file(dir, 2), nano::format_owner(kOther));  // another host's job took it over
  const std::string lost = "nano: this job lost checkpoint folder " + dir +
                           " to job job-b (host hostB, pid 4242, since 2025-12-02 10:40:00 UTC): it stops writing "
                           "there (two jobs must not share a checkpoint folder)";
  CHECK(error_of([&] { claim.check(); }) == lost);
  CHECK(error_of([&] { nano::check_claim_of_job(dir, nano::checkpoint_job_id()); }) == lost);
  // Its own generation is never rewritten again.
  std::this_thread::sleep_for(5 * kQuick.beat_every);
  const uint64_t beat = nano::parse_owner(read(claim_file(dir, 1)))->beat;
  std::this_thread::sleep_for(5 * kQuick.beat_every);
  CHECK(nano::parse_owner(read(claim_file(dir, 1)))->beat == beat);
  unlink(claim_file(dir, 2).c_str());
  unlink(claim_file(dir, 1).c_str());
  CHECK(error_of([&] { claim.check(); }) ==
        "nano: this job lost checkpoint folder " + dir +
            " to nobody (its claim file is gone or unreadable): it stops writing there (two jobs must not share a "
            "checkpoint folder)");
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("folder claim: two takers of one stale claim at once, many times: exactly one wins") {
  // Each round: a claim of a dead process of this host, and two processes (two jobs) that read it
  // and take it over at the same moment.
  for (int round = 0; round < 40; ++round) {
    CAPTURE(round);
    const std::string dir = temp_dir();
    write(claim_file(dir, 3),
          nano::format_owner({"job-dead", host(), nano::machine_id(), dead_pid(), 5, 1764672000, 0}));
    // `go` starts both at once (one byte each); `release` lets the winner go once both have said
    // what they found (a separate pipe: a winner reading `go` again could take the other's start).
    int go[2], said[2], release[2];
    REQUIRE(pipe(go) == 0);
    REQUIRE(pipe(said) == 0);
    REQUIRE(pipe(release) == 0);
    pid_t takers[2];
    for (int t = 0; t < 2; ++t) {
      takers[t] = fork();
      if (takers[t] == 0) {
        alarm(30);  // whatever goes wrong, no taker outlives the test
        close(go[1]);
        close(said[0]);
        close(release[1]);
        freopen("/dev/null", "w", stderr);  // the winner's "taking over" line, 40 times over
        setenv("NANO_CHECKPOINT_JOB", t == 0 ? "taker-0" : "taker-1", 1);
        char c = 0;
        if (read(go[0], &c, 1) != 1) _exit(3);
        char verdict = 'e';
        try {
          nano::FolderClaim claim(dir, kQuick);
          verdict = claim.holds() ? 'w' : 'k';
          if (write(said[1], &verdict, 1) != 1) _exit(3);
          if (read(release[0], &c, 1) < 0) _exit(3);  // holds until the parent closes `release`
        } catch (const std::exception& e) {
          verdict = std::string(e.what()).find(" is in use by job taker-") != std::string::npos ? 'l' : 'e';
          if (write(said[1], &verdict, 1) != 1) _exit(3);
        }
        _exit(0);
      }
    }
    close(go[0]);
    close(said[1]);
    close(release[0]);
    REQUIRE(write(go[1], "gg", 2) == 2);  // both at once
    std::string verdicts;
    char c = 0;
    pollfd p{said[0], POLLIN, 0};
    while (verdicts.size() < 2 && poll(&p, 1, 20000) == 1 && read(said[0], &c, 1) == 1) verdicts += c;
    close(go[1]);
    close(release[1]);  // the winner lets go
    for (pid_t taker : takers) CHECK(wait_bounded(taker, 10));
    close(said[0]);
    std::sort(verdicts.begin(), verdicts.end());
    CHECK(verdicts == "lw");  // one winner, one refused naming the winner
    CHECK(claim_generations_in(dir).empty());
    std::system(("rm -rf " + dir).c_str());
  }
}

TEST_CASE("folder claim: the job's identity comes from nano's launchers, never from a run id a user chose") {
  const std::string own = nano::checkpoint_job_id();
  // torchrun's run id (its default "none", or --rdzv-id): a name two live jobs may share.
  setenv("TORCHELASTIC_RUN_ID", "none", 1);
  CHECK(nano::checkpoint_job_id() == own);
  setenv("TORCHELASTIC_RUN_ID", "run-7", 1);
  CHECK(nano::checkpoint_job_id() == own);
  // nano-run's (it sets NANO_JOB_ID beside it): random per launch, the same on every restart.
  setenv("NANO_JOB_ID", "1234-00ff", 1);
  CHECK(nano::checkpoint_job_id() == "run-7");
  setenv("NANO_CHECKPOINT_JOB", "caller-1", 1);  // an in-program caller's, handed to its ranks
  CHECK(nano::checkpoint_job_id() == "caller-1");
  unsetenv("NANO_CHECKPOINT_JOB");
  unsetenv("NANO_JOB_ID");
  unsetenv("TORCHELASTIC_RUN_ID");
  CHECK(nano::checkpoint_job_id() == own);
}

TEST_CASE("folder claim: a claim that cannot be read is neither free nor lost") {
  const std::string dir = temp_dir();
  nano::FolderClaim claim(dir, kQuick);
  // A FIFO planted at a higher generation's name never blocks a reader: it is no claim of this job.
  REQUIRE(mkfifo(claim_file(dir, 5).c_str(), 0600) == 0);
  CHECK(error_of([&] { claim.check(); }).find("lost checkpoint folder") != std::string::npos);
  unlink(claim_file(dir, 5).c_str());
  CHECK_NOTHROW(claim.check());
  // Too many open files: whose claim is live is unknown, said as such (not "lost").
  struct rlimit old {};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &old) == 0);
  std::vector<int> held;
  struct rlimit few = old;
  few.rlim_cur = 64;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &few) == 0);
  for (int fd; (fd = open("/dev/null", O_RDONLY)) >= 0;) held.push_back(fd);
  std::string why;
  try {
    claim.check();
  } catch (const nano::ClaimUnreadable& e) {
    why = e.what();
  }
  for (int fd : held) close(fd);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &old) == 0);
  CHECK(why == "nano: cannot read the claim of checkpoint folder " + dir + ": Too many open files");
  CHECK_NOTHROW(claim.check());
  std::system(("rm -rf " + dir).c_str());
}
