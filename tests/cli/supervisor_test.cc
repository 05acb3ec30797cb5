#include "cli/supervisor.h"

#include <doctest/doctest.h>
#include <signal.h>

using namespace nano;

TEST_CASE("all ranks exit 0 -> exit 0, no teardown") {
  Supervisor s(3);
  CHECK(s.rank_exited(0, 0, 0).kind == Decision::kNone);
  CHECK(s.rank_exited(2, 0, 0).kind == Decision::kNone);
  CHECK_FALSE(s.all_exited());
  CHECK(s.rank_exited(1, 0, 0).kind == Decision::kNone);
  CHECK(s.all_exited());
  CHECK(s.exit_code() == 0);
  CHECK_FALSE(s.root_cause());
}

TEST_CASE("first failure is the root cause and stops the others") {
  Supervisor s(3);
  Decision d = s.rank_exited(1, 3, 0);
  CHECK(d.kind == Decision::kSignalAll);
  CHECK(d.signal == SIGTERM);
  CHECK(d.start_grace);
  // Ranks dying from our SIGTERM are consequences, not causes.
  CHECK(s.rank_exited(0, 0, SIGTERM).kind == Decision::kNone);
  CHECK(s.grace_expired().kind == Decision::kKillAll);
  CHECK(s.rank_exited(2, 0, SIGKILL).kind == Decision::kNone);
  CHECK(s.exit_code() == 3);
  REQUIRE(s.root_cause());
  CHECK(s.root_cause()->rank == 1);
}

TEST_CASE("a rank killed by a signal gives 128+signal") {
  Supervisor s(2);
  s.rank_exited(0, 0, SIGSEGV);
  s.rank_exited(1, 0, SIGTERM);
  CHECK(s.exit_code() == 128 + SIGSEGV);
}

TEST_CASE("Ctrl-C is forwarded, exits 130; a second one kills") {
  Supervisor s(2);
  Decision d = s.received_signal(SIGINT);
  CHECK(d.kind == Decision::kSignalAll);
  CHECK(d.signal == SIGINT);
  CHECK(s.rank_exited(0, 0, SIGINT).kind == Decision::kNone);
  CHECK(s.received_signal(SIGINT).kind == Decision::kKillAll);
  CHECK(s.received_signal(SIGINT).kind == Decision::kNone);
  s.rank_exited(1, 1, 0);
  CHECK(s.exit_code() == 130);
  CHECK_FALSE(s.root_cause());
}

TEST_CASE("SIGTERM and SIGHUP to nano-run give 143 and 129") {
  Supervisor a(1), b(1);
  CHECK(a.received_signal(SIGTERM).signal == SIGTERM);
  a.rank_exited(0, 0, SIGTERM);
  CHECK(a.exit_code() == 143);
  CHECK(b.received_signal(SIGHUP).signal == SIGHUP);
  b.rank_exited(0, 0, SIGHUP);
  CHECK(b.exit_code() == 129);
}

TEST_CASE("grace expiry does nothing when not tearing down or all gone") {
  Supervisor s(2);
  CHECK(s.grace_expired().kind == Decision::kNone);
  s.rank_exited(0, 5, 0);
  s.rank_exited(1, 0, SIGTERM);
  CHECK(s.grace_expired().kind == Decision::kNone);
  CHECK(s.exit_code() == 5);
}

TEST_CASE("the mpi backend: mpirun failing with no rank to blame") {
  Supervisor s(2);
  s.rank_exited(0, 0, 0);
  s.backend_exited(1, 0);
  CHECK(s.all_exited());
  CHECK(s.exit_code() == 1);
  REQUIRE(s.root_cause());
  CHECK(s.root_cause()->rank == -1);
}

TEST_CASE("the mpi backend: a rank's report beats mpirun's verdict") {
  Supervisor s(2);
  s.rank_exited(1, 7, 0);
  s.backend_exited(1, 0);
  CHECK(s.exit_code() == 7);
  CHECK(s.root_cause()->rank == 1);
}

TEST_CASE("a single failing rank with nobody left needs no teardown") {
  Supervisor s(1);
  CHECK(s.rank_exited(0, 4, 0).kind == Decision::kNone);
  CHECK(s.exit_code() == 4);
}

TEST_CASE("the mpi backend: mpirun's verdict after every rank reported adds no root cause") {
  // Ranks killed by the teardown never reach MPI_Finalize; mpirun then exits non-zero.
  Supervisor s(2);
  s.received_signal(SIGINT);
  s.rank_exited(0, 0, SIGINT);
  s.rank_exited(1, 0, SIGINT);
  s.backend_exited(1, 0);
  CHECK_FALSE(s.root_cause());
  CHECK(s.exit_code() == 130);
  Supervisor ok(2);
  ok.rank_exited(0, 0, 0);
  ok.rank_exited(1, 0, 0);
  CHECK(ok.exited(1));
  CHECK_FALSE(ok.exited(2));
  ok.backend_exited(1, 0);
  CHECK(ok.exit_code() == 0);
}

TEST_CASE("restart policy: failures restart while restarts remain; interruptions and successes never") {
  struct Row {
    int exit_code, interrupted_by, done, max;
    bool restart;
  } rows[] = {
      {3, 0, 0, 2, true},          // a rank failed, 2 restarts left
      {137, 0, 1, 2, true},        // killed by a signal counts as a failure
      {3, 0, 2, 2, false},         // restarts used up
      {0, 0, 0, 2, false},         // success
      {130, SIGINT, 0, 2, false},  // Ctrl-C
      {143, SIGTERM, 0, 2, false}, {129, SIGHUP, 0, 2, false}, {3, 0, 0, 0, false},  // no restarts asked for
  };
  for (const Row& r : rows) {
    CAPTURE(r.exit_code);
    CAPTURE(r.done);
    CHECK(should_restart(r.exit_code, r.interrupted_by, r.done, r.max) == r.restart);
  }
}
