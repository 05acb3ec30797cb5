#include "launcher/supervise/root_cause.h"

#include <doctest/doctest.h>
#include <signal.h>

using namespace nano;

namespace {

EndFacts two_hosts() {
  EndFacts f;
  f.hosts = {"hostA", "hostB", "hostA", "hostB"};
  f.lost = {"", "", "", ""};
  f.this_host = "hostA";
  return f;
}

}  // namespace

TEST_CASE("report_end: the root cause's line, its stderr tail, and the failure returned") {
  struct Case {
    const char* name;
    RootCause cause;
    int exit_code;
    int rank_offset;
    std::vector<std::string> tail;
    std::vector<std::string> lines;
    int failure_rank;
    const char* failure_host;
  };
  const Case cases[] = {
      {"killed rank",
       {1, 0, SIGKILL},
       137,
       0,
       {},
       {"nano-run: root cause: rank 1 on hostB was killed by SIGKILL; nano-run exits with 137"},
       1,
       "hostB"},
      {"exited rank with a tail",
       {2, 3, 0},
       3,
       0,
       {"boom", "bad"},
       {"nano-run: root cause: rank 2 on hostA exited with code 3; nano-run exits with 3",
        "nano-run: last stderr lines of rank 2:", "  | boom", "  | bad"},
       2,
       "hostA"},
      {"rank offset of a Slurm node's part",
       {0, 0, SIGSEGV},
       139,
       4,
       {"segv"},
       {"nano-run: root cause: rank 4 on hostA was killed by SIGSEGV; nano-run exits with 139",
        "nano-run: last stderr lines of rank 4:", "  | segv"},
       4,
       "hostA"},
      {"mpirun itself",
       {-1, 1, 0},
       1,
       0,
       {"mpirun: no"},
       {"nano-run: root cause: mpirun on hostA exited with code 1; nano-run exits with 1",
        "nano-run: last stderr lines of mpirun:", "  | mpirun: no"},
       -1,
       "hostA"},
      {"a signal without a name",
       {0, 0, SIGRTMIN + 1},
       128 + SIGRTMIN + 1,
       0,
       {},
       {"nano-run: root cause: rank 0 on hostA was killed by signal " + std::to_string(SIGRTMIN + 1) +
        "; nano-run exits with " + std::to_string(128 + SIGRTMIN + 1)},
       0,
       "hostA"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    EndFacts f = two_hosts();
    f.root_cause = c.cause;
    f.exit_code = c.exit_code;
    f.rank_offset = c.rank_offset;
    f.stderr_tail = c.tail;
    const EndReport r = report_end(f);
    CHECK(r.lines == c.lines);
    REQUIRE(r.failure);
    CHECK(r.failure->rank == c.failure_rank);
    CHECK(r.failure->host == c.failure_host);
    CHECK(r.failure->exit_code == c.cause.exit_code);
    CHECK(r.failure->signal == c.cause.signal);
    CHECK(r.failure->lost.empty());
  }
}

TEST_CASE("report_end: an attempt that a restart follows does not say what nano-run exits with") {
  EndFacts f = two_hosts();
  f.root_cause = RootCause{1, 3, 0};
  f.exit_code = 3;
  f.restart_follows = true;
  CHECK(report_end(f).lines ==
        std::vector<std::string>{"nano-run: root cause: rank 1 on hostB exited with code 3; a restart follows"});
  f.lost[1] = "its shim's connection to nano-run closed";
  CHECK(report_end(f).lines.front() ==
        "nano-run: root cause: host hostB lost (ranks 1,3 there; rank 1: its shim's connection to nano-run closed); a "
        "restart follows");
}

TEST_CASE("report_end: a lost host names its ranks and why") {
  EndFacts f = two_hosts();
  f.lost[1] = "no word from its shim for 30 s: a cut link or a dead host";
  f.root_cause = RootCause{1, kLostHostExitCode, 0};
  f.exit_code = kLostHostExitCode;
  f.stderr_tail = {"last words"};
  const EndReport r = report_end(f);
  CHECK(r.lines ==
        std::vector<std::string>{
            "nano-run: root cause: host hostB lost (ranks 1,3 there; rank 1: no word from its shim for 30 s: "
            "a cut link or a dead host); nano-run exits with 255",
            "nano-run: last stderr lines of rank 1:", "  | last words"});
  REQUIRE(r.failure);
  CHECK(r.failure->lost == f.lost[1]);
  CHECK(r.failure->stderr_tail == "last words\n");
}

TEST_CASE("report_end: a shim lost on nano-run's own host, alone on it") {
  EndFacts f;
  f.hosts = {"hostA", "hostB"};
  f.lost = {"its shim's connection to nano-run closed", ""};
  f.this_host = "hostA";
  f.root_cause = RootCause{0, kLostHostExitCode, 0};
  f.exit_code = kLostHostExitCode;
  CHECK(report_end(f).lines ==
        std::vector<std::string>{"nano-run: root cause: rank 0's shim on hostA ended without the rank's status (its "
                                 "shim's connection to nano-run closed); nano-run exits with 255"});
  f.this_host = "hostC";  // a host of one rank: "rank", not "ranks"
  CHECK(
      report_end(f).lines ==
      std::vector<std::string>{"nano-run: root cause: host hostA lost (rank 0 there; rank 0: its shim's connection to "
                               "nano-run closed); nano-run exits with 255"});
}

TEST_CASE("report_end: an interruption with no failure, and a clean end") {
  EndFacts f = two_hosts();
  f.interrupted_by = SIGINT;
  f.exit_code = 130;
  EndReport r = report_end(f);
  CHECK(r.lines == std::vector<std::string>{"nano-run: stopped by SIGINT; exit 130"});
  CHECK_FALSE(r.failure);
  f.interrupted_by = 0;
  f.exit_code = 0;
  r = report_end(f);
  CHECK(r.lines.empty());
  CHECK_FALSE(r.failure);
}

TEST_CASE("describe_end") {
  CHECK(describe_end(0, SIGTERM) == "was killed by SIGTERM");
  CHECK(describe_end(7, 0) == "exited with code 7");
}

namespace {

// What torch 1.13's ErrorHandler.record_exception wrote for a RuntimeError raised in helper(),
// called from a @record-decorated main() (a real file, with Python 3.11's ^^^ markers).
const char* const kRecordedJson =
    R"({"message": {"message": "RuntimeError: boom", "extraInfo": {"py_callstack": "Traceback (most recent call )"
    R"(last):\n  File \"/usr/lib/python3/dist-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py\", )"
    R"(line 346, in wrapper\n    return f(*args, **kwargs)\n           ^^^^^^^^^^^^^^^^^^\n  File \"/tmp/train.py\", )"
    R"(line 11, in main\n    helper()\n  File \"/tmp/train.py\", line 4, in helper\n    raise RuntimeError(\"boom\")\n)"
    R"(RuntimeError: boom\n", "timestamp": "1796159026"}}})";

}  // namespace

TEST_CASE("report_end: the exception a rank recorded in its error file") {
  struct Case {
    const char* name;
    RootCause cause;
    int rank_offset;
    std::string error_file;
    std::vector<std::string> tail;
    std::vector<std::string> lines;
    std::string raised;
  };
  const Case cases[] = {
      {"torch's record, with a tail",
       {1, 1, 0},
       0,
       kRecordedJson,
       {"RuntimeError: boom"},
       {"nano-run: root cause: rank 1 on hostB exited with code 1; nano-run exits with 1",
        "nano-run: rank 1 raised RuntimeError: boom (at /tmp/train.py:4 in helper)",
        "nano-run: last stderr lines of rank 1:", "  | RuntimeError: boom"},
       "RuntimeError: boom (at /tmp/train.py:4 in helper)"},
      {"a Slurm node's part names the global rank",
       {0, 1, 0},
       4,
       kRecordedJson,
       {},
       {"nano-run: root cause: rank 4 on hostA exited with code 1; nano-run exits with 1",
        "nano-run: rank 4 raised RuntimeError: boom (at /tmp/train.py:4 in helper)"},
       "RuntimeError: boom (at /tmp/train.py:4 in helper)"},
      {"the plain message form",
       {1, 1, 0},
       0,
       R"({"message": "ValueError: bad input", "timestamp": 7})",
       {},
       {"nano-run: root cause: rank 1 on hostB exited with code 1; nano-run exits with 1",
        "nano-run: rank 1 raised ValueError: bad input"},
       "ValueError: bad input"},
      {"not torch's JSON: nothing said of it",
       {1, 1, 0},
       0,
       "{\"message\": {\"message\": 3",
       {},
       {"nano-run: root cause: rank 1 on hostB exited with code 1; nano-run exits with 1"},
       ""},
      {"mpirun has no error file",
       {-1, 1, 0},
       0,
       kRecordedJson,
       {},
       {"nano-run: root cause: mpirun on hostA exited with code 1; nano-run exits with 1"},
       ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    EndFacts f = two_hosts();
    f.root_cause = c.cause;
    f.exit_code = 1;
    f.rank_offset = c.rank_offset;
    f.stderr_tail = c.tail;
    f.error_file = c.error_file;
    const EndReport r = report_end(f);
    CHECK(r.lines == c.lines);
    REQUIRE(r.failure);
    CHECK(r.failure->raised == c.raised);
  }
}

TEST_CASE("describe_raised: the first line, cut when long, and where") {
  struct Case {
    RaisedError raised;
    std::string text;
  };
  const Case cases[] = {
      {{"RuntimeError: boom", "train.py:12 in main"}, "RuntimeError: boom (at train.py:12 in main)"},
      {{"RuntimeError: boom", ""}, "RuntimeError: boom"},
      {{"AssertionError: ", "t.py:3 in <module>"}, "AssertionError: (at t.py:3 in <module>)"},
      {{"RuntimeError: boom\nsecond line", "t.py:4 in helper"}, "RuntimeError: boom [...] (at t.py:4 in helper)"},
      {{"E: " + std::string(300, 'x'), ""}, "E: " + std::string(197, 'x') + " [...]"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    CHECK(describe_raised(c.raised) == c.text);
  }
}

TEST_CASE("describe_leaver: the peer that left while the root cause waited in a collective") {
  const std::string waited = "while this rank waited in all_reduce(float32[4], SUM) #6";
  struct Case {
    const char* name;
    int waiter;
    std::vector<std::string> tail;
    std::vector<std::string> ends;
    int rank_offset;
    std::string line;
  };
  const Case cases[] = {
      {"an early exit 0",
       0,
       {"Traceback", "RuntimeError: nano: rank 1 (pid 19202) exited after its collective #5 " + waited},
       {"", "exited with code 0"},
       0,
       "rank 1 exited with code 0 after its collective #5 while rank 0 waited in all_reduce(float32[4], SUM) #6: "
       "rank 1 left early, or rank 0 called one collective more"},
      {"before its first collective, on a Slurm node's part",
       5,
       {"nano: rank 4 (pid 7) exited before its first collective while this rank waited in barrier() #1"},
       {"exited with code 0", ""},
       4,
       "rank 4 exited with code 0 before its first collective while rank 5 waited in barrier() #1: rank 4 left early, "
       "or rank 5 called one collective more"},
      {"a communicator destroyed, its rank's end not known (another node's rank)",
       0,
       {"nano: rank 3 (pid 9) left the world (its communicator was destroyed) after its collective #2 " + waited},
       {"", ""},
       0,
       "rank 3 left after its collective #2 while rank 0 waited in all_reduce(float32[4], SUM) #6: rank 3 left early, "
       "or rank 0 called one collective more"},
      {"a peer that died during the collective is not a leaver",
       0,
       {"nano: rank 1 (pid 7) exited during the collective (all_reduce(float32[4], SUM) #6)"},
       {"", "was killed by SIGKILL"},
       0,
       ""},
      {"no such line", 0, {"boom"}, {"", ""}, 0, ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.name);
    CHECK(describe_leaver(c.waiter, c.tail, c.ends, c.rank_offset) == c.line);
  }
  EndFacts f = two_hosts();
  f.root_cause = RootCause{0, 1, 0};
  f.exit_code = 1;
  f.stderr_tail = cases[0].tail;
  f.ends = {"exited with code 1", "exited with code 0", "", ""};
  const EndReport r = report_end(f);
  REQUIRE(r.lines.size() >= 2);
  CHECK(r.lines[0] == "nano-run: root cause: rank 0 on hostA exited with code 1; nano-run exits with 1");
  CHECK(r.lines[1] == "nano-run: " + cases[0].line);
}

TEST_CASE("hosts_lost: the root cause's lost host, hosts whose shims did not start, never the consequences") {
  struct Row {
    const char* name;
    std::optional<RootCause> cause;
    std::vector<std::string> lost;  // by rank, over hostA hostB hostC hostB
    std::vector<bool> started;
    std::vector<std::string> expected;  // "host: why"
  };
  const std::string closed = "its shim's connection to nano-run closed";
  const std::vector<Row> table = {
      {"no failure", std::nullopt, {"", "", "", ""}, {true, true, true, true}, {}},
      {"a rank failed on its own: no host lost", RootCause{2, 1, 0}, {"", "", "", ""}, {true, true, true, true}, {}},
      {"hostC lost first; hostB's shims closed as a consequence",
       RootCause{2, kLostHostExitCode, 0},
       {"", closed, closed, closed},
       {true, true, true, true},
       {"hostC: " + closed}},
      {"the launching host's own shim is never its host's loss",
       RootCause{0, kLostHostExitCode, 0},
       {closed, "", "", ""},
       {true, true, true, true},
       {}},
      {"mpirun failed; hostC's shims never started",
       RootCause{-1, 1, 0},
       {"", "", "", ""},
       {true, true, false, true},
       {"hostC: its shims did not start"}},
      {"a start bound: the lost rank's reason, once per host",
       RootCause{2, kLostHostExitCode, 0},
       {"", "", "its shim did not start within 30 s", ""},
       {true, true, false, true},
       {"hostC: its shim did not start within 30 s"}},
      {"mpirun failed before any shim started: no host named",
       RootCause{-1, 1, 0},
       {"", "", "", ""},
       {false, false, false, false},
       {}},
      {"a rank's own failure while another host had not started: not a loss",
       RootCause{1, 3, 0},
       {"", "", "", ""},
       {true, true, false, true},
       {}},
  };
  for (const Row& row : table) {
    CAPTURE(row.name);
    EndFacts f;
    f.hosts = {"hostA", "hostB", "hostC", "hostB"};
    f.this_host = "hostA";
    f.root_cause = row.cause;
    f.lost = row.lost;
    f.started = row.started;
    std::vector<std::string> got;
    for (const LostHost& l : hosts_lost(f)) got.push_back(l.host + ": " + l.why);
    CHECK(got == row.expected);
  }
}
