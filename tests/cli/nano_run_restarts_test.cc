// Integration tests of nano-run's restarts (--max-restarts) and of the torchrun worker
// environment its ranks get in every attempt: the real nano-run on rank_probe, a shell and a
// stock PyTorch program, with both backends.
#include <doctest/doctest.h>

#include <signal.h>
#include <unistd.h>
#include "tests/cli/nano_run_helpers.h"
#include "tests/common/process_checks.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

using nlohmann::json;

namespace {

using namespace nano::test::cli;
using nano::test::all_dead_within;
using nano::test::slurp;
using nano::test::temp_dir;

const std::string kTorchrunEnv = TORCHRUN_ENV_PY_PATH;

}  // namespace

TEST_CASE("--max-restarts: a failing world starts again with NANO_RESTART_COUNT; attempts and logs are counted") {
  for (std::string backend : kBackends) {
    CAPTURE(backend);
    std::string dir = temp_dir("nano_run_test");
    // Rank 1 fails on the first attempt only: the second attempt succeeds.
    Result once = run({"-n", "2", "--backend", backend, "--max-restarts", "2", "--restart-delay", "0.2", "--log-dir",
                       dir + "/logs", "--", "/bin/sh", "-c",
                       "if [ \"$NANO_RESTART_COUNT\" = 0 ] && [ \"$RANK\" = 1 ]; then exit 3; fi; "
                       "echo attempt $NANO_RESTART_COUNT port $MASTER_PORT"});
    CAPTURE(once.err);
    CHECK(once.rc == 0);
    CHECK(once.err.find("nano-run: restart 1 of 2 in 0.2 s (attempt 1 ended with 3)") != std::string::npos);
    CHECK(once.err.find("restart 2 of 2") == std::string::npos);
    CHECK(once.out.find("[rank 0] attempt 1 port ") != std::string::npos);
    CHECK(once.out.find("[rank 1] attempt 1 port ") != std::string::npos);
    CHECK(slurp(dir + "/logs/attempt-1/rank-1.log").find("attempt 1") != std::string::npos);
    CHECK(slurp(dir + "/logs/summary.log").find("restart 1 of 2") != std::string::npos);
    // Always failing: exactly 3 attempts, then the rank's code.
    Result always = run({"-n", "2", "--backend", backend, "--max-restarts", "2", "--restart-delay", "0.1", "--",
                         "/bin/sh", "-c", "if [ \"$RANK\" = 1 ]; then exit 3; fi; sleep 30"});
    CAPTURE(always.err);
    CHECK(always.rc == 3);
    CHECK(always.err.find("restart 2 of 2") != std::string::npos);
    CHECK(always.err.find("nano-run: 3 attempts; the last ended with 3") != std::string::npos);
    std::system(("rm -rf " + dir).c_str());
  }
}

TEST_CASE("--max-restarts: Ctrl-C is never restarted, also during the restart delay") {
  for (std::string backend : kBackends) {
    CAPTURE(backend);
    std::string dir = temp_dir("nano_run_test");
    // Ctrl-C while the world runs: exit 130, no restart.
    Proc p = start({"-n", "2", "--backend", backend, "--max-restarts", "3", kProbe, "--pid-dir", dir, "--sleep", "30"});
    auto pids = wait_pid_files(dir, 2);
    REQUIRE(pids.size() == 2);
    kill(p.pid, SIGINT);
    Result r = wait_for(p);
    CHECK(r.rc == 130);
    CHECK(r.err.find("restart") == std::string::npos);
    CHECK(all_dead_within(pids, 1.0));
    // Ctrl-C during a long restart delay: exit 130 at once, no second attempt.
    Proc q = start({"-n", "1", "--backend", backend, "--max-restarts", "3", "--restart-delay", "60", "--", "/bin/sh",
                    "-c", "exit 3"});
    auto until = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < until && slurp(q.dir + "/err").find("restart 1 of 3") == std::string::npos)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    kill(q.pid, SIGINT);
    Result d = wait_for(q, 10);
    CHECK(d.rc == 130);
    CHECK(d.err.find("stopped by SIGINT before the restart; exit 130") != std::string::npos);
    std::system(("rm -rf " + dir).c_str());
  }
}

TEST_CASE("torchrun's whole worker environment, after a restart too; a @record exception names the root cause") {
  // nano-run copied into a prefix of its own with nano's Python folder and listen guard beside
  // it, as installed: PREFIX/bin/nano-run, PREFIX/lib/nano/python (holding a module the program
  // imports) and PREFIX/lib/nano/libnano_listen_guard.so (the mpi backend preloads it).
  namespace fs = std::filesystem;
  const std::string prefix = temp_dir("nano_run_test");
  const std::string folder = prefix + "/lib/nano/python", nano_run = prefix + "/bin/nano-run";
  fs::create_directories(folder);
  fs::create_directories(prefix + "/bin");
  std::ofstream(folder + "/nano_marker.py") << "\n";
  fs::copy_file(kNanoRun, nano_run);
  fs::copy_file(fs::path(kNanoRun).parent_path().parent_path() / "lib/nano/libnano_listen_guard.so",
                prefix + "/lib/nano/libnano_listen_guard.so");
  // Where the program raises, as Python's traceback names it.
  int raise_line = 0;
  {
    std::ifstream script(kTorchrunEnv);
    std::string line;
    for (int n = 1; std::getline(script, line); ++n)
      if (line.find("raise RuntimeError(f\"boom on attempt") != std::string::npos) raise_line = n;
  }
  REQUIRE(raise_line > 0);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  for (std::string backend : kBackends) {
    CAPTURE(backend);
    // An agent's variables exported: dropped with one warning, or rank 0 would wait as a client
    // of a store nobody serves.
    Proc p = start({"-n", "2", "--backend", backend, "--max-restarts", "1", "--restart-delay", "0.2", "--grace-period",
                    "1", "/usr/bin/python3", kTorchrunEnv, "--fail-first-attempt"},
                   {"PYTHONPATH=/user/py", "TORCHELASTIC_USE_AGENT_STORE=True", "TORCHELASTIC_ENABLE_FILE_TIMER=1",
                    "TORCHELASTIC_TIMER_FILE=/tmp/nano-test-watchdog"},
                   nano_run);
    Result r = wait_for(p, 120);
    CAPTURE(r.err);
    MESSAGE(backend << ": two attempts in " << r.seconds << " s");
    CHECK(r.rc == 0);
    const std::string warning =
        "nano-run: warning: not passing TORCHELASTIC_USE_AGENT_STORE=True, TORCHELASTIC_ENABLE_FILE_TIMER=1, "
        "TORCHELASTIC_TIMER_FILE=/tmp/nano-test-watchdog to the ranks: nano-run runs no torchelastic agent, so "
        "nothing would serve what it points at (its store, its watchdog)\n";
    const auto first = r.err.find(warning);
    CHECK(first == 0);
    CHECK(r.err.find(warning, first + 1) == std::string::npos);
    // The first attempt's root cause: rank 1's exception, read from its error file.
    CHECK(r.err.find("\nnano-run: root cause: rank 1 on " + std::string(host) +
                     " exited with code 1; a restart follows\n"
                     "nano-run: rank 1 raised RuntimeError: boom on attempt 0 (at " +
                     kTorchrunEnv + ":" + std::to_string(raise_line) +
                     " in fail)\n"
                     "nano-run: last stderr lines of rank 1:\n") != std::string::npos);
    CHECK(r.err.find("nano-run: restart 1 of 1 in 0.2 s (attempt 1 ended with 1)\n") != std::string::npos);

    // What every rank saw, by attempt.
    std::map<std::pair<int, int>, json> seen;
    std::istringstream out(r.out);
    std::string line;
    while (std::getline(out, line)) {
      REQUIRE(line.rfind("[rank ", 0) == 0);
      const auto close = line.find("] ");
      const int rank = std::stoi(line.substr(6, close - 6));
      json j = json::parse(line.substr(close + 2));
      seen[{std::stoi(j["TORCHELASTIC_RESTART_COUNT"].get<std::string>()), rank}] = j;
    }
    REQUIRE(seen.size() == 4);
    const std::string job0 = seen[{0, 0}]["NANO_JOB_ID"], job1 = seen[{1, 0}]["NANO_JOB_ID"];
    CHECK(job0 != job1);  // each attempt its own files; the run id stays
    for (int attempt = 0; attempt < 2; ++attempt) {
      const std::string job = attempt == 0 ? job0 : job1;
      for (int rank = 0; rank < 2; ++rank) {
        CAPTURE(attempt);
        CAPTURE(rank);
        json& e = seen[{attempt, rank}];
        const std::string me = std::to_string(rank), count = std::to_string(attempt);
        const json expected = {
            {"RANK", me},
            {"LOCAL_RANK", me},
            {"WORLD_SIZE", "2"},
            {"LOCAL_WORLD_SIZE", "2"},
            {"GROUP_RANK", "0"},
            {"GROUP_WORLD_SIZE", "1"},
            {"ROLE_RANK", me},
            {"ROLE_WORLD_SIZE", "2"},
            {"ROLE_NAME", "default"},
            {"MASTER_ADDR", "127.0.0.1"},
            {"MASTER_PORT", seen[{attempt, 0}]["MASTER_PORT"]},
            {"TORCHELASTIC_RESTART_COUNT", count},
            {"TORCHELASTIC_MAX_RESTARTS", "1"},
            {"TORCHELASTIC_RUN_ID", job0},
            {"TORCHELASTIC_ERROR_FILE", "/dev/shm/nano-" + job + "/rank-" + me + "/error.json"},  // one host
            {"TORCHELASTIC_USE_AGENT_STORE", nullptr},
            {"TORCHELASTIC_ENABLE_FILE_TIMER", nullptr},
            {"TORCHELASTIC_TIMER_FILE", nullptr},
            {"NANO_JOB_ID", job},
            {"NANO_RESTART_COUNT", count},
            {"PYTHONPATH", folder + ":/user/py"},
            {"elastic_launched", true},
            {"error_folder_mode", "0o700"},
            {"nano_marker", true},
        };
        CHECK(e.dump() == expected.dump());
      }
    }
    // Every attempt's folders went with it.
    for (const auto& entry : fs::directory_iterator("/dev/shm")) {
      const std::string name = entry.path().filename().string();
      CHECK(name.find(job0) == std::string::npos);
      CHECK(name.find(job1) == std::string::npos);
    }
  }
  fs::remove_all(prefix);
}
