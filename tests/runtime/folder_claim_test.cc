// One owner per checkpoint folder: the pure verdict as a table, then the claim file in a real
// folder (another host's live and silent claims, a dead owner on this host, this job's own), and
// the refusal through prepare_checkpoint_dir and Checkpointer.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include <nano/checkpoint.h>
#include <nano/communicator.h>
#include <nano/error.h>
#include "runtime/folder_claim.h"

#include <doctest/doctest.h>

namespace {

using nano::ClaimFacts;
using nano::ClaimVerdict;
using nano::FolderOwner;

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

// What `f` writes to stderr (and the message of what it throws, after a '|').
std::string stderr_of(const std::function<void()>& f) {
  std::fflush(stderr);
  const std::string file = "/tmp/nano_folder_claim_stderr_" + std::to_string(getpid());
  const int saved = dup(2);
  const int to = open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(to, 2);
  close(to);
  std::string thrown;
  try {
    f();
  } catch (const std::exception& e) {
    thrown = std::string("|") + e.what();
  }
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  const std::string text = read(file);
  unlink(file.c_str());
  return text + thrown;
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

const FolderOwner kOther{"job-b", "hostB", 4242, 77, 1764672000};  // 2025-12-02 10:40:00 UTC

}  // namespace

TEST_CASE("folder claim: the verdict for every kind of existing claim") {
  struct Row {
    const char* what;
    std::optional<FolderOwner> existing;
    ClaimFacts facts;
    ClaimVerdict verdict;
  };
  const FolderOwner here{"job-b", "hostA", 4242, 77, 0};
  const FolderOwner ours{"job-a", "hostB", 4242, 77, 0};
  const Row rows[] = {
      {"no claim", std::nullopt, {}, ClaimVerdict::kFree},
      {"another host, fresh heartbeat", kOther, {3.0, std::nullopt}, ClaimVerdict::kHeldByOther},
      {"another host, 30 s: not yet", kOther, {30.0, std::nullopt}, ClaimVerdict::kHeldByOther},
      {"another host, silent 31 s", kOther, {31.0, std::nullopt}, ClaimVerdict::kStale},
      {"this host, running", here, {100.0, true}, ClaimVerdict::kHeldByOther},  // a stopped job still owns it
      {"this host, gone", here, {1.0, false}, ClaimVerdict::kStale},
      {"this job, anywhere", ours, {1000.0, false}, ClaimVerdict::kOurs},
  };
  for (const Row& r : rows) {
    CAPTURE(r.what);
    CHECK(nano::judge_claim(r.existing, r.facts, "job-a", "hostA") == r.verdict);
  }
  // Of this job's claims, only a gone owner's passes on (a restarted rank replacing its predecessor).
  CHECK(nano::same_job_owner_gone({"job-a", "hostA", 1, 1, 0}, {0.0, false}, "hostA"));
  CHECK_FALSE(nano::same_job_owner_gone({"job-a", "hostA", 1, 1, 0}, {100.0, true}, "hostA"));
  CHECK_FALSE(nano::same_job_owner_gone({"job-a", "hostB", 1, 1, 0}, {5.0, std::nullopt}, "hostA"));
  CHECK(nano::same_job_owner_gone({"job-a", "hostB", 1, 1, 0}, {45.0, std::nullopt}, "hostA"));
}

TEST_CASE("folder claim: the file reads back; a partial one is no claim") {
  const std::string text = nano::format_owner(kOther);
  CHECK(text == "job job-b\nhost hostB\npid 4242\nstart 77\nsince 1764672000\n");
  const auto back = nano::parse_owner(text);
  REQUIRE(back);
  CHECK(back->job == "job-b");
  CHECK(back->host == "hostB");
  CHECK(back->pid == 4242);
  CHECK(back->start_ticks == 77);
  CHECK(back->since == 1764672000);
  CHECK_FALSE(nano::parse_owner(text.substr(0, 30)));
  CHECK_FALSE(nano::parse_owner("job x\nhost y\npid nope\nstart 1\nsince 1\n"));
  CHECK_FALSE(nano::parse_owner(""));
}

TEST_CASE("folder claim: held while alive, refused to another job, released at the end") {
  const std::string dir = temp_dir();
  const std::string file = dir + "/" + nano::kOwnerFile;
  {
    nano::FolderClaim claim(dir);
    CHECK(claim.holds());
    const auto owner = nano::parse_owner(read(file));
    REQUIRE(owner);
    CHECK(owner->pid == getpid());
    CHECK(owner->host == host());
    CHECK(owner->job == nano::checkpoint_job_id());
    {
      nano::FolderClaim again(dir);  // the same job, its owner running: kept as it is
      CHECK_FALSE(again.holds());
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

TEST_CASE("folder claim: another host's claim is refused while it beats and taken over once silent") {
  const std::string dir = temp_dir();
  const std::string file = dir + "/" + nano::kOwnerFile;
  write(file, nano::format_owner(kOther));
  const std::string held = "|nano: checkpoint folder " + dir +
                           " is in use by job job-b (host hostB, pid 4242, since 2025-12-02 10:40:00 UTC): stop that "
                           "job or use another folder";
  CHECK(stderr_of([&] { nano::FolderClaim c(dir); }) == held);
  age(file, 20);
  CHECK(stderr_of([&] { nano::FolderClaim c(dir); }) == held);
  // The refusal reaches a Checkpointer (rank 0) before it touches the folder.
  CHECK(stderr_of([&] { nano::Checkpointer c(dir, std::make_shared<nano::SelfCommunicator>()); }) == held);
  age(file, 45);
  std::optional<nano::FolderClaim> claim;
  CHECK(stderr_of([&] { claim.emplace(dir); }) == "nano: checkpoint folder " + dir +
                                                      ": taking over the claim of job job-b (host hostB, pid 4242, "
                                                      "since 2025-12-02 10:40:00 UTC), which is gone\n");
  CHECK(claim->holds());
  CHECK(nano::parse_owner(read(file))->pid == getpid());
  claim.reset();
  CHECK_FALSE(std::ifstream(file).good());
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("folder claim: a dead owner on this host is replaced at once; this job's, quietly") {
  const std::string dir = temp_dir();
  const std::string file = dir + "/" + nano::kOwnerFile;
  const int64_t gone = dead_pid();
  write(file, nano::format_owner({"job-c", host(), gone, 5, 1764672000}));
  std::optional<nano::FolderClaim> claim;
  CHECK(stderr_of([&] { claim.emplace(dir); }) ==
        "nano: checkpoint folder " + dir + ": taking over the claim of job job-c (host " + host() + ", pid " +
            std::to_string(gone) + ", since 2025-12-02 10:40:00 UTC), which is gone\n");
  CHECK(claim->holds());
  claim.reset();
  // A restart: this job's earlier attempt died holding the folder.
  write(file, nano::format_owner({nano::checkpoint_job_id(), host(), gone, 5, 1764672000}));
  CHECK(stderr_of([&] { claim.emplace(dir); }).empty());
  CHECK(claim->holds());
  CHECK(nano::parse_owner(read(file))->pid == getpid());
  claim.reset();
  // A claim file that is not a whole claim (no live owner writes one) is replaced, said once.
  write(file, "job x\n");
  CHECK(stderr_of([&] { claim.emplace(dir); }) ==
        "nano: checkpoint folder " + dir + ": replacing an unreadable claim file\n");
  claim.reset();
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("folder claim: the holder's heartbeat keeps the claim fresh") {
  const std::string dir = temp_dir();
  const std::string file = dir + "/" + nano::kOwnerFile;
  nano::FolderClaim claim(dir);
  age(file, 25);
  // Refreshed at the next heartbeat: watched for until twice its period (a loaded machine may
  // wake the heartbeat late; a claim that is never refreshed stays 25 s old).
  const auto deadline = std::chrono::steady_clock::now() + 2 * nano::kHeartbeatEvery;
  long long age_seen = 25;
  while (std::chrono::steady_clock::now() < deadline) {
    struct stat st {};
    REQUIRE(stat(file.c_str(), &st) == 0);
    age_seen = static_cast<long long>(time(nullptr) - st.st_mtim.tv_sec);
    if (age_seen <= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(age_seen <= 2);
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("folder claim: the job's identity comes from the launch, never from torchrun's default \"none\"") {
  const std::string own = nano::checkpoint_job_id();
  setenv("TORCHELASTIC_RUN_ID", "none", 1);
  CHECK(nano::checkpoint_job_id() == own);
  setenv("TORCHELASTIC_RUN_ID", "run-7", 1);
  CHECK(nano::checkpoint_job_id() == "run-7");
  setenv("NANO_CHECKPOINT_JOB", "caller-1", 1);  // an in-program caller's, handed to its ranks
  CHECK(nano::checkpoint_job_id() == "caller-1");
  unsetenv("NANO_CHECKPOINT_JOB");
  unsetenv("TORCHELASTIC_RUN_ID");
  CHECK(nano::checkpoint_job_id() == own);
}
