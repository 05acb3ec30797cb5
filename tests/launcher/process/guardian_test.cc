#include "launcher/process/guardian.h"

#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

using namespace nano;

namespace {
bool exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}
}  // namespace

TEST_CASE("remove_tree and remove_with_prefix remove whole trees, and only what is named") {
  char tmpl[] = "/tmp/nano_guardian_test_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  mkdir((dir + "/job-1-a").c_str(), 0700);
  mkdir((dir + "/job-1-a/deep").c_str(), 0700);
  std::ofstream(dir + "/job-1-a/deep/file") << "x";
  std::ofstream(dir + "/job-1-b") << "x";
  std::ofstream(dir + "/job-10") << "x";
  std::ofstream(dir + "/other") << "x";
  CHECK(remove_with_prefix(dir.c_str(), "job-1-"));
  CHECK_FALSE(exists(dir + "/job-1-a"));
  CHECK_FALSE(exists(dir + "/job-1-b"));
  CHECK(exists(dir + "/job-10"));
  CHECK(exists(dir + "/other"));
  CHECK_FALSE(remove_with_prefix(dir.c_str(), ""));  // never everything
  CHECK(exists(dir + "/other"));
  CHECK(remove_tree(dir.c_str()));
  CHECK_FALSE(exists(dir));
  CHECK(remove_tree(dir.c_str()));  // already gone is fine
}

TEST_CASE("the guardian kills the watched groups and removes the files when its launcher dies") {
  char tmpl[] = "/tmp/nano_guardian_test_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::ofstream(dir + "/file") << "x";
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  pid_t launcher = fork();
  if (launcher == 0) {
    // The "launcher": a guardian, a process group of two sleepers, then an abrupt death.
    close(ready[0]);
    Guardian guardian;
    pid_t leader = fork();
    if (leader == 0) {
      setpgid(0, 0);
      if (fork() == 0) execlp("sleep", "sleep", "60", static_cast<char*>(nullptr));
      execlp("sleep", "sleep", "60", static_cast<char*>(nullptr));
      _exit(127);
    }
    setpgid(leader, leader);
    guardian.watch_group({leader, process_start_time(leader)});
    guardian.remove_path(dir + "/file");
    ssize_t ignored = write(ready[1], &leader, sizeof leader);
    (void)ignored;
    pause();
  }
  close(ready[1]);
  pid_t group = 0;
  REQUIRE(read(ready[0], &group, sizeof group) == static_cast<ssize_t>(sizeof group));
  CHECK(kill(-group, 0) == 0);
  kill(launcher, SIGKILL);
  waitpid(launcher, nullptr, 0);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while ((kill(-group, 0) == 0 || exists(dir + "/file")) && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(kill(-group, 0) != 0);  // the whole group: leader and its child
  CHECK_FALSE(exists(dir + "/file"));
  remove_tree(dir.c_str());
}
