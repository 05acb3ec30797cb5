#include "launcher/supervise/supervisor.h"

#include <doctest/doctest.h>
#include <signal.h>

#include <vector>

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

TEST_CASE("which failures are told as they happen: the root cause, and mpirun's verdict without one") {
  // Each row: events in order (r = rank_exited, b = backend_exited, s = received_signal, g =
  // grace_expired), and the announce flag each decision carries.
  struct Event {
    char kind;
    int rank, exit_code, signal;
    bool announce;
  };
  struct Row {
    const char* name;
    std::vector<Event> events;
  } rows[] = {
      {"the first failure, with others left", {{'r', 1, 3, 0, true}, {'r', 0, 0, SIGTERM, false}}},
      {"the first failure, with nobody left",
       {{'r', 0, 0, 0, false}, {'r', 2, 0, 0, false}, {'r', 1, 0, SIGSEGV, true}}},
      {"a later failure during the teardown, and nano-run's own SIGKILL",
       {{'r', 2, 1, 0, true}, {'r', 0, 7, 0, false}, {'g', 0, 0, 0, false}, {'r', 1, 0, SIGKILL, false}}},
      {"a SIGKILL nano-run did not send takes the root cause", {{'r', 2, 1, 0, true}, {'r', 1, 0, SIGKILL, true}}},
      {"a failure after nano-run was interrupted", {{'s', 0, 0, SIGINT, false}, {'r', 0, 1, 0, false}}},
      {"the same rank reported twice", {{'r', 0, 0, 0, false}, {'r', 0, 5, 0, false}, {'r', 1, 0, 0, false}}},
      {"a success is never told",
       {{'r', 0, 0, 0, false}, {'r', 1, 0, 0, false}, {'r', 2, 0, 0, false}, {'b', -1, 0, 0, false}}},
      {"mpirun failing with ranks unaccounted for", {{'r', 0, 0, 0, false}, {'b', -1, 1, 0, true}}},
      {"mpirun failing after every rank reported",
       {{'r', 0, 0, 0, false}, {'r', 1, 0, 0, false}, {'r', 2, 0, 0, false}, {'b', -1, 0, SIGKILL, true}}},
      {"mpirun failing after a rank's root cause", {{'r', 1, 4, 0, true}, {'b', -1, 1, 0, false}}},
      {"mpirun failing after an interruption", {{'s', 0, 0, SIGTERM, false}, {'b', -1, 1, 0, false}}},
      {"the grace deadline tells nothing", {{'r', 0, 2, 0, true}, {'g', 0, 0, 0, false}}},
  };
  for (const Row& row : rows) {
    CAPTURE(row.name);
    Supervisor s(3);
    for (size_t i = 0; i < row.events.size(); ++i) {
      const Event& e = row.events[i];
      CAPTURE(i);
      Decision d;
      if (e.kind == 'r') d = s.rank_exited(e.rank, e.exit_code, e.signal);
      if (e.kind == 'b') d = s.backend_exited(e.exit_code, e.signal);
      if (e.kind == 's') d = s.received_signal(e.signal);
      if (e.kind == 'g') d = s.grace_expired();
      CHECK(d.announce == e.announce);
    }
  }
}

TEST_CASE("the first failure's teardown: SIGTERM with the grace timer, then one SIGKILL") {
  Supervisor s(3);
  const Decision first = s.rank_exited(2, 1, 0);
  CHECK(first.kind == Decision::kSignalAll);
  CHECK(first.signal == SIGTERM);
  CHECK(first.start_grace);
  CHECK(s.tearing_down());
  // A second failure starts nothing more and does not take the root cause.
  CHECK(s.rank_exited(0, 9, 0).kind == Decision::kNone);
  CHECK(s.grace_expired().kind == Decision::kKillAll);
  CHECK(s.grace_expired().kind == Decision::kNone);
  // SIGINT to nano-run after the kill: nothing left to escalate, and no interruption recorded.
  CHECK(s.received_signal(SIGINT).kind == Decision::kNone);
  CHECK(s.interrupted_by() == 0);
  REQUIRE(s.root_cause());
  CHECK(s.root_cause()->rank == 2);
  CHECK(s.exit_code() == 1);
}

TEST_CASE("a stop the caller asked for (a tuning trial): SIGTERM, nobody's failure, exit 0") {
  Supervisor s(2);
  Decision d = s.stop_requested();
  CHECK(d.kind == Decision::kSignalAll);
  CHECK(d.signal == SIGTERM);
  CHECK(d.start_grace);
  CHECK(s.stopped());
  CHECK(s.stop_requested().kind == Decision::kNone);  // once
  CHECK_FALSE(s.rank_exited(0, 0, SIGTERM).announce);
  CHECK(s.grace_expired().kind == Decision::kKillAll);
  CHECK_FALSE(s.backend_exited(1, 0).announce);  // mpirun's verdict on the stopped ranks
  CHECK(s.exit_code() == 0);
  CHECK_FALSE(s.root_cause());
  // Ctrl-C during the stop still says so.
  Supervisor t(1);
  t.stop_requested();
  t.received_signal(SIGINT);
  CHECK(t.exit_code() == 130);
  CHECK(t.interrupted_by() == SIGINT);
  // A rank that failed before the stop stays the root cause; nothing is stopped then.
  Supervisor u(2);
  u.rank_exited(1, 3, 0);
  CHECK(u.stop_requested().kind == Decision::kNone);
  CHECK_FALSE(u.stopped());
  CHECK(u.exit_code() == 3);
}

TEST_CASE("a SIGKILL nano-run did not send, told within the settle window, takes the root cause") {
  // Across hosts: rank 1 on hostB is SIGKILLed; rank 0 on hostA loses its connection and exits
  // 14 before hostB's shim has reported rank 1's end.
  struct Row {
    const char* name;
    int first_code, first_signal;  // rank 0's end, the first told
    bool settled, grace_over;      // before rank 1's end is told
    int second_signal;             // rank 1's end
    int root_rank, exit_code;
  };
  const std::vector<Row> table = {
      {"SIGKILL within the window", 14, 0, false, false, SIGKILL, 1, 128 + SIGKILL},
      {"SIGKILL after the window", 14, 0, true, false, SIGKILL, 0, 14},
      {"SIGKILL after nano-run's own", 14, 0, false, true, SIGKILL, 0, 14},
      {"our SIGTERM's consequence", 14, 0, false, false, SIGTERM, 0, 14},
      {"an abort is a consequence too", 14, 0, false, false, SIGABRT, 0, 14},
      {"a first failure by a signal stays", 0, SIGSEGV, false, false, SIGKILL, 0, 128 + SIGSEGV},
  };
  for (const Row& row : table) {
    CAPTURE(row.name);
    Supervisor s(3);
    const Decision first = s.rank_exited(0, row.first_code, row.first_signal);
    CHECK(first.announce);
    CHECK(first.start_settle);
    CHECK_FALSE(first.replaces_root_cause);
    if (row.settled) s.settled();
    if (row.grace_over) CHECK(s.grace_expired().kind == Decision::kKillAll);
    const Decision second = s.rank_exited(1, 0, row.second_signal);
    CHECK(second.kind == Decision::kNone);  // the teardown is under way already
    CHECK(second.announce == (row.root_rank == 1));
    CHECK(second.replaces_root_cause == (row.root_rank == 1));
    REQUIRE(s.root_cause());
    CHECK(s.root_cause()->rank == row.root_rank);
    CHECK(s.exit_code() == row.exit_code);
    // Once taken by a SIGKILL, a third rank's SIGKILL does not take it again.
    if (row.root_rank == 1) CHECK_FALSE(s.rank_exited(2, 0, SIGKILL).replaces_root_cause);
  }
}

TEST_CASE("a last rank failing alone starts no settle window") {
  Supervisor s(2);
  s.rank_exited(0, 0, 0);
  const Decision d = s.rank_exited(1, 3, 0);
  CHECK(d.announce);
  CHECK_FALSE(d.start_settle);
}
