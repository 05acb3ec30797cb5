// Process-level tests of DistributedDataParallel, auto_lr and sharding on both communicators.
// Each world runs a list of scenarios one after another (rank_worker SCENARIO,SCENARIO,...): a
// process start and a rendezvous cost more than most scenarios, and what a scenario checks does
// not depend on being first in its process. The worlds are run once, at their first use, and each
// test case checks its scenarios' lines in them.
#include <doctest/doctest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/runtime/launch.h"

namespace {

const std::string kWorker = NANO_TEST_RANK_WORKER;

std::string ok_line(const std::string& scenario, int rank, int world, const std::string& comm) {
  return "OK " + scenario + " rank " + std::to_string(rank) + " of " + std::to_string(world) + " (" + comm + ")";
}

// One world's output per communicator ("mpi", "gloo"): stdout of every rank, and what went wrong.
struct Worlds {
  std::map<std::string, std::string> out;
  std::map<std::string, std::string> trouble;  // exit codes and stderr, for the failure message
};

// Runs `scenarios` (comma-separated) in a world of `world` ranks under both communicators: under
// mpirun (MPI) and under the test's own launcher (Gloo).
Worlds run_both(const std::string& scenarios, int world = 2, const nano::Environment& env = {}) {
  Worlds w;
  const std::vector<std::string> argv{kWorker, scenarios};
  auto mpi = nano::test::run_mpirun(argv, world, env);
  w.out["mpi"] = mpi.out;
  if (mpi.exit_code != 0) w.trouble["mpi"] = "exit " + std::to_string(mpi.exit_code) + ": " + mpi.err;
  for (const auto& r : nano::test::run_world(argv, world, env)) {
    w.out["gloo"] += r.out;
    if (r.exit_code != 0) w.trouble["gloo"] += "exit " + std::to_string(r.exit_code) + ": " + r.err;
  }
  return w;
}

// Every rank of both worlds passed `scenario`.
void check_ok(const Worlds& w, const std::string& scenario, int world = 2) {
  for (const std::string comm : {"mpi", "gloo"}) {
    CAPTURE(comm);
    INFO("stdout:\n" << w.out.at(comm) << (w.trouble.count(comm) ? "\n" + w.trouble.at(comm) : ""));
    for (int r = 0; r < world; ++r) CHECK(w.out.at(comm).find(ok_line(scenario, r, world, comm)) != std::string::npos);
  }
}

// The two-rank worlds every scenario without a special environment runs in.
const Worlds& two_ranks() {
  static const Worlds w = run_both(
      "broadcast,rank-grads,rank-grads:64,grads,grads:256,unused:200,equivalence,auto-lr,sharding,balance,bf16-grads");
  return w;
}

// Three ranks: the uneven splits.
const Worlds& three_ranks() {
  static const Worlds w = run_both("grads:256,balance", 3);
  return w;
}

bool has(const Worlds& w, const std::string& comm, const std::string& text) {
  return w.out.at(comm).find(text) != std::string::npos;
}

}  // namespace

TEST_CASE("DDP construction broadcasts parameters and buffers; forward syncs buffers") {
  check_ok(two_ranks(), "broadcast");
}

TEST_CASE("DDP averages rank-filled gradients to the closed form, one and many buckets") {
  check_ok(two_ranks(), "rank-grads");
  check_ok(two_ranks(), "rank-grads:64");
  for (const std::string comm : {"mpi", "gloo"}) {
    CHECK(has(two_ranks(), comm, "rank-grads: buckets 1\n"));
    CHECK_FALSE(has(two_ranks(), comm, "rank-grads:64: buckets 1\n"));  // bucket_cap_bytes = 64: many
  }
}

TEST_CASE("N-rank DDP gradients equal the single-process gradients of the concatenated batch") {
  check_ok(two_ranks(), "grads");           // default buckets
  check_ok(two_ranks(), "grads:256");       // small buckets
  check_ok(three_ranks(), "grads:256", 3);  // 3 ranks
}

TEST_CASE("unused parameters neither hang nor skew the average") { check_ok(two_ranks(), "unused:200"); }

TEST_CASE("bf16 gradient exchange: within bfloat16's rounding of the float32 exchange, on every communicator") {
  // MPI and Gloo, each through shared memory (the default on one host) and without it
  // (NANO_SHM_BYTES=0: MPI's bfloat16 op, Gloo's float path).
  check_ok(two_ranks(), "bf16-grads");
  check_ok(run_both("bf16-grads", 2, {{"NANO_SHM_BYTES", "0"}}), "bf16-grads");
}

TEST_CASE("the seed's equivalence check: 1 process lr 0.25 == 2 processes lr 0.5, w = 0.25") {
  auto single = nano::test::run_ranks({kWorker, "equivalence"}, 1, {0});
  INFO(single[0].out << single[0].err);
  CHECK(single[0].exit_code == 0);
  CHECK(single[0].out.find("equivalence: w 0.25\n") != std::string::npos);
  check_ok(two_ranks(), "equivalence");
  for (const std::string comm : {"mpi", "gloo"}) CHECK(has(two_ranks(), comm, "equivalence: w 0.25\n"));
}

TEST_CASE("auto_lr: the rate at every step equals the closed form in a real world") {
  check_ok(two_ranks(), "auto-lr");
}

TEST_CASE("sharded loaders: disjoint cover per epoch, reshuffled, per-rank batch size kept") {
  check_ok(two_ranks(), "sharding");
}

TEST_CASE("batch balancing: a much slower rank gets fewer samples; gradients stay the global batch's mean") {
  check_ok(two_ranks(), "balance");
  check_ok(three_ranks(), "balance", 3);
}

#ifdef NANO_TEST_NANO_RUN
TEST_CASE("under nano-run (both backends): the seed's equivalence check and gradient equality") {
  for (const std::string backend : {"subprocess", "mpi"}) {
    const std::string comm = backend == "mpi" ? "mpi" : "gloo";
    CAPTURE(backend);
    auto result = nano::test::run_command(
        {NANO_TEST_NANO_RUN, "-n", "2", "--backend", backend, "--oversubscribe", "--", kWorker, "equivalence,grads"});
    INFO("stdout:\n" << result.out << "stderr:\n" << result.err);
    CHECK(result.exit_code == 0);
    for (const std::string scenario : {"equivalence", "grads"})
      for (int r = 0; r < 2; ++r) CHECK(result.out.find(ok_line(scenario, r, 2, comm)) != std::string::npos);
  }
}
#endif
