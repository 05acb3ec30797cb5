// Table tests of the pure env -> Context decision.
#include <chrono>
#include <cstdlib>
#include <string>

#include <nano/context.h>
#include <nano/error.h>

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
