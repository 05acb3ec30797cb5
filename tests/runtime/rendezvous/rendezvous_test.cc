// The rendezvous' pure parts and its checks of the job's folder (runtime/rendezvous/rendezvous.h).
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <nano/context.h>
#include <nano/error.h>
#include "runtime/rendezvous/rendezvous.h"

// c10's logging defines a fatal CHECK; doctest's must win, so it comes last.
#undef CHECK
#include <doctest/doctest.h>

TEST_CASE("rendezvous: a nano-run job on one host meets in a file, any other world over TCP") {
  nano::Context one_host;
  one_host.world_size = one_host.local_world_size = 4;
  nano::Context two_hosts = one_host;
  two_hosts.local_world_size = 2;
  const std::string job = "/dev/shm/nano-ab12";
  CHECK(nano::file_store_path(job, one_host, "nano/rank/") == "/dev/shm/nano-ab12/store-nano-rank-");
  CHECK(nano::file_store_path(job, one_host, "nano/mpi/") == "/dev/shm/nano-ab12/store-nano-mpi-");
  CHECK(nano::file_store_path(job, two_hosts, "nano/rank/").empty());  // other hosts cannot see its folder
  CHECK(nano::file_store_path("", one_host, "nano/rank/").empty());    // not under nano's launcher: no job folder
  CHECK(nano::file_store_path("x", one_host, "nano/rank/").empty());   // only an absolute folder
}

TEST_CASE("rendezvous: the job's folder must be this user's private one") {
  char tmpl[] = "/tmp/nano_job_dir_test_XXXXXX";
  const std::string dir = mkdtemp(tmpl);  // 0700, ours
  CHECK_NOTHROW(nano::check_private_job_dir(dir));
  chmod(dir.c_str(), 0755);
  CHECK_THROWS_WITH_AS(nano::check_private_job_dir(dir),
                       ("nano: the job's folder " + dir + " is not this user's private folder (owner uid " +
                        std::to_string(getuid()) + ", mode 0755): refusing to meet there")
                           .c_str(),
                       nano::Error);
  chmod(dir.c_str(), 0700);
  const std::string link = dir + "-link";
  REQUIRE(symlink(dir.c_str(), link.c_str()) == 0);
  CHECK_THROWS_WITH_AS(nano::check_private_job_dir(link),
                       ("nano: the job's folder " + link + " is not this user's private folder (owner uid " +
                        std::to_string(getuid()) + ", mode 0777): refusing to meet there")
                           .c_str(),
                       nano::Error);
  unlink(link.c_str());
  CHECK_THROWS_WITH_AS(nano::check_private_job_dir(dir + "/none"),
                       ("nano: the job's folder " + dir + "/none (NANO_JOB_DIR): No such file or directory").c_str(),
                       nano::Error);
  rmdir(dir.c_str());
}

TEST_CASE("rendezvous timeout message") {
  CHECK(nano::rendezvous_timeout_message("127.0.0.1:29500", 2, {1, 3}, 4) ==
        "nano: rendezvous at 127.0.0.1:29500 timed out after 2 s: 2 of 4 ranks did not join "
        "(missing: 1,3)");
}
