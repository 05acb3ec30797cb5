// Table tests of the pure env -> Context decision.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <nano/context.h>
#include <nano/error.h>
#include "runtime/collectives/shm_collectives.h"
#include "runtime/collectives/shm_rendezvous.h"
#include "runtime/communicators/gloo_communicator.h"
#include "runtime/rendezvous/rendezvous.h"

// c10's logging defines a fatal CHECK; doctest's must win, so it comes last.
#undef CHECK
#include <doctest/doctest.h>

using nano::CommBackend;
using nano::Context;
using nano::Environment;
using nano::Launcher;

TEST_CASE("context_from_env: launchers") {
  struct Row {
    const char* name;
    Environment env;
    int affinity;
    int rank, world, local_rank, local_world;
    Launcher launcher;
    CommBackend backend;
    int threads;
  };
  const std::vector<Row> rows = {
      {"no launcher: a world of one, threads untouched", {}, 8, 0, 1, 0, 1, Launcher::kNone, CommBackend::kSelf, 0},
      {"no launcher ignores OMP_NUM_THREADS",
       {{"OMP_NUM_THREADS", "3"}},
       8,
       0,
       1,
       0,
       1,
       Launcher::kNone,
       CommBackend::kSelf,
       0},
      {"nano-run subprocess",
       {{"RANK", "1"},
        {"WORLD_SIZE", "4"},
        {"LOCAL_RANK", "1"},
        {"LOCAL_WORLD_SIZE", "2"},
        {"MASTER_ADDR", "10.0.0.1"},
        {"MASTER_PORT", "29400"},
        {"NANO_CPUS", "2-3"},
        {"OMP_NUM_THREADS", "2"}},
       8,
       1,
       4,
       1,
       2,
       Launcher::kNanoRun,
       CommBackend::kGloo,
       2},
      {"torchrun, threads from the affinity mask",
       {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29400"}},
       5,
       0,
       2,
       0,
       2,
       Launcher::kTorchrun,
       CommBackend::kGloo,
       5},
      {"plain mpirun",
       {{"OMPI_COMM_WORLD_RANK", "2"},
        {"OMPI_COMM_WORLD_SIZE", "3"},
        {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
        {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"}},
       1,
       2,
       3,
       0,
       1,
       Launcher::kMpirun,
       CommBackend::kMpi,
       1},
      {"nano-run mpi backend: both sets agree, MPI chosen",
       {{"OMPI_COMM_WORLD_RANK", "1"},
        {"OMPI_COMM_WORLD_SIZE", "2"},
        {"RANK", "1"},
        {"WORLD_SIZE", "2"},
        {"NANO_CPUS", "1"},
        {"MASTER_PORT", "5000"}},
       1,
       1,
       2,
       1,
       2,
       Launcher::kNanoRun,
       CommBackend::kMpi,
       1},
      {"NANO_BACKEND overrides mpi",
       {{"OMPI_COMM_WORLD_RANK", "0"},
        {"OMPI_COMM_WORLD_SIZE", "2"},
        {"NANO_BACKEND", "gloo"},
        {"MASTER_PORT", "5000"}},
       0,
       0,
       2,
       0,
       2,
       Launcher::kMpirun,
       CommBackend::kGloo,
       0},
      {"world of one under mpirun",
       {{"OMPI_COMM_WORLD_SIZE", "1"}},
       2,
       0,
       1,
       0,
       1,
       Launcher::kMpirun,
       CommBackend::kSelf,
       2},
  };
  for (const auto& row : rows) {
    CAPTURE(row.name);
    Context c = nano::context_from_env(row.env, row.affinity);
    CHECK(c.rank == row.rank);
    CHECK(c.world_size == row.world);
    CHECK(c.local_rank == row.local_rank);
    CHECK(c.local_world_size == row.local_world);
    CHECK(c.launcher == row.launcher);
    CHECK(c.backend == row.backend);
    CHECK(c.threads == row.threads);
  }
}

TEST_CASE("context_from_env: address, cpus, timeout, explicit options") {
  Context c = nano::context_from_env({{"RANK", "0"},
                                      {"WORLD_SIZE", "2"},
                                      {"MASTER_ADDR", "node7"},
                                      {"MASTER_PORT", "29500"},
                                      {"NANO_CPUS", "0-3"},
                                      {"NANO_RENDEZVOUS_TIMEOUT", "2.5"}});
  CHECK(c.master_addr == "node7");
  CHECK(c.master_port == 29500);
  CHECK(c.cpus == "0-3");
  CHECK(c.rendezvous_timeout == std::chrono::milliseconds(2500));
  CHECK(nano::context_from_env({}).rendezvous_timeout == std::chrono::seconds(300));
  nano::InitOptions options;
  options.backend = CommBackend::kGloo;
  options.rendezvous_timeout = std::chrono::seconds(7);
  Context d = nano::context_from_env({{"OMPI_COMM_WORLD_SIZE", "2"},
                                      {"OMPI_COMM_WORLD_RANK", "1"},
                                      {"MASTER_PORT", "1234"},
                                      {"NANO_BACKEND", "mpi"},
                                      {"NANO_RENDEZVOUS_TIMEOUT", "1"}},
                                     0, options);
  CHECK(d.backend == CommBackend::kGloo);
  CHECK(d.rendezvous_timeout == std::chrono::seconds(7));
}

TEST_CASE("context_from_env: bad input names the variable and value") {
  struct Row {
    Environment env;
    const char* message;
  };
  const std::vector<Row> rows = {
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}}, "nano: bad RANK='2': expected an integer in [0, 1]"},
      {{{"RANK", "x"}, {"WORLD_SIZE", "2"}}, "nano: bad RANK='x': expected an integer in [0, 1]"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}}, "nano: bad WORLD_SIZE='0': expected an integer in [1, 2147483647]"},
      {{{"RANK", "0"}}, "nano: RANK is set but WORLD_SIZE is not"},
      {{{"WORLD_SIZE", "2"}}, "nano: WORLD_SIZE is set but RANK is not"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}},
       "nano: MASTER_PORT is unset: the gloo communicator needs it for a world of 2"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "70000"}},
       "nano: bad MASTER_PORT='70000': expected an integer in [1, 65535]"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "1"}, {"NANO_BACKEND", "mpi"}},
       "nano: backend mpi needs a launch under mpirun (OMPI_COMM_WORLD_SIZE is unset) for a world of 2"},
      {{{"NANO_BACKEND", "nccl"}}, "nano: bad NANO_BACKEND='nccl': expected auto, mpi or gloo"},
      {{{"NANO_RENDEZVOUS_TIMEOUT", "-1"}},
       "nano: bad NANO_RENDEZVOUS_TIMEOUT='-1': expected a positive number of seconds"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "1"}},
       "nano: RANK/WORLD_SIZE=0/2 disagree with OMPI_COMM_WORLD_RANK/SIZE=1/2"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"OMP_NUM_THREADS", "0"}},
       "nano: bad OMP_NUM_THREADS='0': expected an integer in [1, 65536]"},
  };
  for (const auto& row : rows) {
    CAPTURE(row.message);
    CHECK_THROWS_WITH_AS(nano::context_from_env(row.env), row.message, nano::UsageError);
  }
}

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

TEST_CASE("shared memory: what rank 0 publishes is bounded before use") {
  struct Row {
    const char* text;
    bool ok;
    const char* name;
    std::size_t bytes;
  };
  const Row rows[] = {
      {"/nano-job-1-0\n1048576", true, "/nano-job-1-0", 1048576},
      {"\n0", true, "", 0},                                              // rank 0 could not make one
      {"/nano-x\n1125899906842624", true, "/nano-x", 1125899906842624},  // 1 PiB
      {"/nano-x\n1125899906842688", false, "", 0},                       // over 1 PiB
      {"/nano-x\n100", false, "", 0},                                    // not a multiple of 64
      {"/nano-x\n-64", false, "", 0},
      {"/nano-x\n18446744073709551616", false, "", 0},
      {"/nano-x", false, "", 0},          // no size
      {"/etc/passwd\n64", false, "", 0},  // not a name of nano's
      {"/nano-../../x\n64", false, "", 0},
      {"someone\n64", false, "", 0},
  };
  for (const Row& r : rows) {
    CAPTURE(r.text);
    const auto area = nano::parse_shared_area(r.text);
    REQUIRE(area.has_value() == r.ok);
    if (!area) continue;
    CHECK(area->name == r.name);
    CHECK(area->data_bytes == r.bytes);
  }
  CHECK_FALSE(nano::parse_shared_area(std::string(300, 'x') + "\n64"));
}

TEST_CASE("shared memory: an object another user made is never mapped") {
  if (getuid() != 0) return;  // making another user's object needs root
  const std::string name = "/nano-context-test-" + std::to_string(getpid());
  const pid_t child = fork();
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);  // nobody plants it, open to all
    const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0666);
    _exit(fd >= 0 && fchmod(fd, 0666) == 0 && ftruncate(fd, 4096) == 0 ? 0 : 3);
  }
  int status = 0;
  waitpid(child, &status, 0);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK_THROWS_WITH_AS(
      nano::SharedMemory::open(name, 4096),
      ("nano: shared memory " + name + " is not this user's private object: refusing to map it").c_str(), nano::Error);
  shm_unlink(name.c_str());
}

TEST_CASE("shared memory: NANO_SHM_BYTES is 0 or a byte count from 64 to 1 PiB, else one line naming it") {
  struct Row {
    const char* text;
    long long bytes;  // -1: refused
  };
  const Row rows[] = {{"0", 0},
                      {"64", 64},
                      {"1048576", 1048576},
                      {"1125899906842624", 1125899906842624},
                      {"32", -1},
                      {"63", -1},
                      {"1125899906842625", -1},
                      {"99999999999999999999", -1},
                      {"-64", -1},
                      {"", -1},
                      {"4k", -1}};
  for (const Row& r : rows) {
    CAPTURE(r.text);
    setenv("NANO_SHM_BYTES", r.text, 1);
    if (r.bytes >= 0) {
      CHECK(nano::shm_bytes_from_environment() == static_cast<std::size_t>(r.bytes));
    } else {
      CHECK_THROWS_WITH_AS(nano::shm_bytes_from_environment(),
                           (std::string("nano: bad NANO_SHM_BYTES='") + r.text +
                            "': expected 0 or a byte count from 64 to 1125899906842624")
                               .c_str(),
                           nano::UsageError);
    }
  }
  unsetenv("NANO_SHM_BYTES");
  CHECK(nano::shm_bytes_from_environment() == nano::ShmCollectives::kDefaultAreaBytes);
}
