// Process-level tests of the communicators: real ranks under mpirun (MPI communicator) and
// under this test's own launcher (Gloo communicator, c10d TCPStore rendezvous).
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "launcher/prepare/port.h"
#include "tests/runtime/launch.h"

using nano::test::run_mpirun;
using nano::test::run_ranks;
using nano::test::run_world;

namespace {

// The last line of `text` with its newline (c10d may log lines of its own before ours).
std::string last_line(const std::string& text) {
  auto end = text.size() && text.back() == '\n' ? text.size() - 1 : text.size();
  auto start = text.rfind('\n', end ? end - 1 : 0);
  return text.substr(start == std::string::npos || end == 0 ? 0 : start + 1);
}

const std::string kWorker = NANO_TEST_RANK_WORKER;

// Asserts every rank printed its OK line and exited 0.
void expect_ok_gloo(const std::string& scenario, int world, const std::string& arg = "",
                    const nano::test::Environment& env = {}) {
  std::vector<std::string> argv{kWorker, arg.empty() ? scenario : scenario + ":" + arg};
  auto results = run_world(argv, world, env);
  for (int r = 0; r < world; ++r) {
    INFO("gloo rank " << r << " stdout:\n" << results[r].out << "stderr:\n" << results[r].err);
    CHECK(results[r].exit_code == 0);
    CHECK(results[r].out.find("OK " + scenario + " rank " + std::to_string(r) + " of " + std::to_string(world) +
                              " (gloo)") != std::string::npos);
  }
}

void expect_ok_mpi(const std::string& scenario, int world, const nano::test::Environment& env = {}) {
  std::vector<std::string> argv{kWorker, scenario};
  auto result = run_mpirun(argv, world, env);
  INFO("mpirun stdout:\n" << result.out << "stderr:\n" << result.err);
  CHECK(result.exit_code == 0);
  for (int r = 0; r < world; ++r) {
    CHECK(result.out.find("OK " + scenario + " rank " + std::to_string(r) + " of " + std::to_string(world) +
                          " (mpi)") != std::string::npos);
  }
}

}  // namespace

TEST_CASE("collectives: rank-filled all-reduce closed form, f32/f64/bf16, broadcast, gather") {
  SUBCASE("mpi, 2 ranks, shared-memory path") { expect_ok_mpi("collectives", 2); }
  SUBCASE("mpi, 3 ranks, shared memory in many small chunks") {
    expect_ok_mpi("collectives", 3, {{"NANO_SHM_BYTES", "4096"}});
  }
  SUBCASE("mpi, 2 ranks, MPI_Allreduce path") { expect_ok_mpi("collectives", 2, {{"NANO_SHM_BYTES", "0"}}); }
  SUBCASE("gloo, 2 ranks, shared-memory path") { expect_ok_gloo("collectives", 2); }
  SUBCASE("gloo, 3 ranks, shared memory in many small chunks") {
    expect_ok_gloo("collectives", 3, "", {{"NANO_SHM_BYTES", "4096"}});
  }
  SUBCASE("gloo, 3 ranks, Gloo's own all-reduce") { expect_ok_gloo("collectives", 3, "", {{"NANO_SHM_BYTES", "0"}}); }
}

// The ranks the Gloo cases below started: tests that ctest runs beside this one make (and, when
// they kill a rank on purpose, remove a moment later) names of their own in /dev/shm.
std::set<long> gloo_case_ranks;

std::vector<nano::test::RankResult> run_gloo_world(const std::vector<std::string>& argv, int world,
                                                   const nano::test::Environment& extra = {}, int timeout_s = 120) {
  auto results = run_world(argv, world, extra, timeout_s);
  for (const auto& r : results) gloo_case_ranks.insert(r.pid);
  return results;
}

// Shared-memory objects made by those ranks ("/dev/shm/nano-PID-..." with PID one of them) that
// are still there: leaks, since every one of those ranks has ended.
std::vector<std::string> orphaned_shared_memory() {
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("nano-", 0) != 0) continue;
    if (gloo_case_ranks.count(std::strtol(name.c_str() + 5, nullptr, 10))) found.push_back(name);
  }
  return found;
}

TEST_CASE("gloo on one host: all-reduce through shared memory, and nothing left in /dev/shm") {
  SUBCASE("the transport each setting selects") {
    for (auto [bytes, transport] : {std::pair<const char*, const char*>{nullptr, "shared memory"}, {"0", "gloo"}}) {
      nano::test::Environment env;
      if (bytes) env["NANO_SHM_BYTES"] = bytes;
      auto results = run_gloo_world({kWorker, "collectives"}, 2, env);
      for (int r = 0; r < 2; ++r) {
        INFO("rank " << r << ":\n" << results[r].out << results[r].err);
        CHECK(results[r].exit_code == 0);
        CHECK(results[r].out.find(std::string("transport: ") + transport + "\n") != std::string::npos);
      }
    }
  }
  SUBCASE("shared memory that cannot be sized (more than /dev/shm holds) falls back to Gloo, saying why") {
    // 2 x 1 PiB: tmpfs refuses the allocation up front (more than its size), allocating nothing.
    auto results = run_gloo_world({kWorker, "collectives"}, 2, {{"NANO_SHM_BYTES", "1125899906842624"}});
    for (int r = 0; r < 2; ++r) {
      INFO("rank " << r << ":\n" << results[r].out << results[r].err);
      CHECK(results[r].exit_code == 0);
      CHECK(results[r].out.find("transport: gloo\n") != std::string::npos);
    }
    CHECK(results[0].err.find("nano: cannot size shared memory /nano-") != std::string::npos);
    CHECK(results[0].err.find("; collectives go through TCP instead (NANO_SHM_BYTES=0 chooses that "
                              "quietly)\n") != std::string::npos);
  }
  SUBCASE("ranks posing as one per host (LOCAL_WORLD_SIZE 1 of 2) keep Gloo") {
    auto results = run_gloo_world({kWorker, "collectives"}, 2, {{"LOCAL_WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}});
    for (int r = 0; r < 2; ++r) {
      INFO("rank " << r << ":\n" << results[r].out << results[r].err);
      CHECK(results[r].exit_code == 0);
      CHECK(results[r].out.find("transport: gloo\n") != std::string::npos);
    }
  }
  SUBCASE("a peer that dies mid-collective is reported, not awaited forever") {
    auto results = run_gloo_world({kWorker, "peer-exits"}, 2, {}, 60);
    for (int r = 0; r < 2; ++r) {
      INFO("rank " << r << ":\n" << results[r].out << results[r].err);
      CHECK(results[r].exit_code == 0);
      CHECK(results[r].out.find("OK peer-exits rank " + std::to_string(r) + " of 2 (gloo)") != std::string::npos);
    }
  }
  SUBCASE("a libtorch program whose ranks call mismatched collectives: both fail, naming both calls") {
    // Through shared memory, and through Gloo (NANO_SHM_BYTES=0: signatures exchanged first).
    for (const auto& [scenario, bytes] :
         {std::pair<std::string, std::string>{"mismatch", ""}, {"mismatch-root", "0"}}) {
      nano::test::Environment env;
      if (!bytes.empty()) env["NANO_SHM_BYTES"] = bytes;
      auto results = run_gloo_world({kWorker, scenario}, 2, env, 60);
      for (int r = 0; r < 2; ++r) {
        INFO(scenario << ", rank " << r << ":\n" << results[r].out << results[r].err);
        CHECK(results[r].exit_code == 0);
        CHECK(results[r].out.find("OK " + scenario + " rank " + std::to_string(r) + " of 2 (gloo)") !=
              std::string::npos);
      }
    }
  }
  SUBCASE("a bad NANO_SHM_BYTES stops every rank with one line naming it") {
    // One value through real ranks (runtime.collectives.unit holds the table of what is refused).
    for (const std::string bad : {"1125899906842625"}) {
      auto results = run_gloo_world({kWorker, "collectives"}, 2, {{"NANO_SHM_BYTES", bad}}, 60);
      for (int r = 0; r < 2; ++r) {
        CHECK(results[r].exit_code == 3);
        CHECK(last_line(results[r].err) ==
              "nano: bad NANO_SHM_BYTES='" + bad + "': expected 0 or a byte count from 64 to 1125899906842624\n");
      }
    }
  }
  CHECK(orphaned_shared_memory() == std::vector<std::string>{});
}

TEST_CASE("mpi on one host: the shared window, or MPI_Allreduce when /dev/shm cannot hold it") {
  SUBCASE("the default places the all-reduce in the shared window") {
    auto result = run_mpirun({kWorker, "collectives"}, 2, {});
    INFO("mpirun stdout:\n" << result.out << "stderr:\n" << result.err);
    CHECK(result.exit_code == 0);
    CHECK(result.out.find("transport: shared memory\n") != std::string::npos);
    CHECK(result.out.find("transport: mpi\n") == std::string::npos);
  }
  SUBCASE("ranks that call mismatched collectives: both fail, naming both calls") {
    // The shared window's all-reduce; MPI's own small one, its signature compared in the window;
    // and without the window (NANO_SHM_BYTES=0), signatures through MPI_Allgather.
    for (const auto& [scenario, bytes] :
         {std::pair<std::string, std::string>{"mismatch", ""}, {"mismatch-small", ""}, {"mismatch-root", "0"}}) {
      nano::test::Environment env;
      if (!bytes.empty()) env["NANO_SHM_BYTES"] = bytes;
      auto result = run_mpirun({kWorker, scenario}, 2, env);
      INFO(scenario << ": mpirun stdout:\n" << result.out << "stderr:\n" << result.err);
      CHECK(result.exit_code == 0);
      for (int r = 0; r < 2; ++r)
        CHECK(result.out.find("OK " + scenario + " rank " + std::to_string(r) + " of 2 (mpi)") != std::string::npos);
    }
  }
  SUBCASE("a window larger than /dev/shm's free space falls back instead of aborting the job") {
    // Open MPI itself would abort every rank with MPI_ERR_INTERN here (MPI_ERRORS_ARE_FATAL).
    auto result = run_mpirun({kWorker, "collectives"}, 2, {{"NANO_SHM_BYTES", "1125899906842624"}});
    INFO("mpirun stdout:\n" << result.out << "stderr:\n" << result.err);
    CHECK(result.exit_code == 0);
    for (int r = 0; r < 2; ++r) {
      CHECK(result.out.find("OK collectives rank " + std::to_string(r) + " of 2 (mpi)") != std::string::npos);
    }
    CHECK(result.out.find("transport: shared memory") == std::string::npos);
    CHECK(result.out.find("transport: mpi\n") != std::string::npos);
    const std::string line = "nano: cannot place the shared-memory all-reduce in /dev/shm: 2 ranks need ";
    const auto at = result.err.find(line);
    REQUIRE(at != std::string::npos);
    CHECK(result.err.find(line, at + 1) == std::string::npos);  // rank 0 alone says it
    CHECK(result.err.find(" are free; all-reduce goes through MPI_Allreduce instead (NANO_SHM_BYTES=0 chooses that "
                          "quietly)\n") != std::string::npos);
  }
}

TEST_CASE("a world of one runs without any launcher") {
  auto result = nano::test::run_ranks({kWorker, "collectives"}, 1, {0});
  // run_ranks sets RANK/WORLD_SIZE=1: the self communicator.
  INFO(result[0].out << result[0].err);
  CHECK(result[0].exit_code == 0);
  CHECK(result[0].out.find("OK collectives rank 0 of 1 (self)") != std::string::npos);
}

TEST_CASE("gloo rendezvous that does not complete fails with the address and missing ranks") {
  const int port = nano::pick_free_port();
  const std::string address = "127.0.0.1:" + std::to_string(port);
  SUBCASE("only rank 0 started: rank 1 is missing") {
    auto results = run_ranks({kWorker, "collectives"}, 2, {0}, {{"NANO_RENDEZVOUS_TIMEOUT", "1"}}, port, 60);
    CHECK(results[0].exit_code == 3);
    CHECK(last_line(results[0].err) ==
          "nano: rendezvous at " + address + " timed out after 1 s: 1 of 2 ranks did not join (missing: 1)\n");
  }
  SUBCASE("only rank 2 of 3 started: ranks 0 (the store host) and 1 are missing") {
    auto results = run_ranks({kWorker, "collectives"}, 3, {2}, {{"NANO_RENDEZVOUS_TIMEOUT", "1.5"}}, port, 60);
    CHECK(results[0].exit_code == 3);
    CHECK(last_line(results[0].err) ==
          "nano: rendezvous at " + address + " timed out after 1.5 s: the store host (rank 0) did not answer\n");
  }
}

TEST_CASE("bad rank variables are one-line usage errors") {
  auto results = run_ranks({kWorker, "collectives"}, 2, {0}, {{"NANO_BACKEND", "nccl"}}, 0, 60);
  CHECK(results[0].exit_code == 3);
  CHECK(last_line(results[0].err) == "nano: bad NANO_BACKEND='nccl': expected auto, mpi or gloo\n");
}
