// Process-level tests of DistributedDataParallel, auto_lr and sharding on both communicators.
#include <doctest/doctest.h>

#include <string>

#include "tests/runtime/launch.h"

namespace {

const std::string kWorker = NANO_TEST_RANK_WORKER;

std::string ok_line(const std::string& scenario, int rank, int world, const std::string& comm) {
  return "OK " + scenario + " rank " + std::to_string(rank) + " of " + std::to_string(world) + " (" + comm + ")";
}

// Runs `scenario` on 2 ranks under both communicators; returns the combined stdout.
std::string run_both(const std::vector<std::string>& args, int world = 2) {
  std::vector<std::string> argv{kWorker};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string all;
  {
    auto result = nano::test::run_mpirun(argv, world);
    INFO("mpirun stdout:\n" << result.out << "stderr:\n" << result.err);
    CHECK(result.exit_code == 0);
    for (int r = 0; r < world; ++r) CHECK(result.out.find(ok_line(args[0], r, world, "mpi")) != std::string::npos);
    all += result.out;
  }
  auto results = nano::test::run_world(argv, world);
  for (int r = 0; r < world; ++r) {
    INFO("gloo rank " << r << " stdout:\n" << results[r].out << "stderr:\n" << results[r].err);
    CHECK(results[r].exit_code == 0);
    CHECK(results[r].out.find(ok_line(args[0], r, world, "gloo")) != std::string::npos);
    all += results[r].out;
  }
  return all;
}

}  // namespace

TEST_CASE("DDP construction broadcasts parameters and buffers; forward syncs buffers") { run_both({"broadcast"}); }

TEST_CASE("DDP averages rank-filled gradients to the closed form, one and many buckets") {
  SUBCASE("one bucket") {
    auto out = run_both({"rank-grads"});
    CHECK(out.find("buckets 1\n") != std::string::npos);
  }
  SUBCASE("many buckets (bucket_cap_bytes = 64)") {
    auto out = run_both({"rank-grads", "64"});
    CHECK(out.find("buckets 1\n") == std::string::npos);
  }
}

TEST_CASE("N-rank DDP gradients equal the single-process gradients of the concatenated batch") {
  SUBCASE("default buckets") { run_both({"grads"}); }
  SUBCASE("small buckets") { run_both({"grads", "256"}); }
  SUBCASE("3 ranks") { run_both({"grads", "256"}, 3); }
}

TEST_CASE("unused parameters neither hang nor skew the average") { run_both({"unused", "200"}); }

TEST_CASE("bf16 gradient exchange: within bfloat16's rounding of the float32 exchange, on every communicator") {
  // MPI and Gloo, each through shared memory (the default on one host) and without it
  // (NANO_SHM_BYTES=0: MPI's bfloat16 op, Gloo's float path).
  for (const char* shm : {"", "0"}) {
    CAPTURE(shm);
    const nano::Environment env = *shm ? nano::Environment{{"NANO_SHM_BYTES", shm}} : nano::Environment{};
    const std::vector<std::string> argv{kWorker, "bf16-grads"};
    auto mpi = nano::test::run_mpirun(argv, 2, env);
    INFO("mpirun stdout:\n" << mpi.out << "stderr:\n" << mpi.err);
    CHECK(mpi.exit_code == 0);
    for (int r = 0; r < 2; ++r) CHECK(mpi.out.find(ok_line("bf16-grads", r, 2, "mpi")) != std::string::npos);
    auto gloo = nano::test::run_world(argv, 2, env);
    for (int r = 0; r < 2; ++r) {
      INFO("gloo rank " << r << " stdout:\n" << gloo[r].out << "stderr:\n" << gloo[r].err);
      CHECK(gloo[r].out.find(ok_line("bf16-grads", r, 2, "gloo")) != std::string::npos);
    }
  }
}

TEST_CASE("the seed's equivalence check: 1 process lr 0.25 == 2 processes lr 0.5, w = 0.25") {
  auto single = nano::test::run_ranks({kWorker, "equivalence"}, 1, {0});
  INFO(single[0].out << single[0].err);
  CHECK(single[0].exit_code == 0);
  CHECK(single[0].out.find("w 0.25\n") != std::string::npos);
  auto out = run_both({"equivalence"});
  CHECK(out.find("w 0.25\n") != std::string::npos);
}

TEST_CASE("auto_lr: the rate at every step equals the closed form in a real world") { run_both({"auto-lr"}); }

TEST_CASE("sharded loaders: disjoint cover per epoch, reshuffled, per-rank batch size kept") { run_both({"sharding"}); }

TEST_CASE("batch balancing: a much slower rank gets fewer samples; gradients stay the global batch's mean") {
  SUBCASE("2 ranks") { run_both({"balance"}); }
  SUBCASE("3 ranks") { run_both({"balance"}, 3); }
}

#ifdef NANO_TEST_NANO_RUN
TEST_CASE("under nano-run (both backends): the seed's equivalence check and gradient equality") {
  for (const std::string backend : {"subprocess", "mpi"}) {
    const std::string comm = backend == "mpi" ? "mpi" : "gloo";
    for (const std::string scenario : {"equivalence", "grads"}) {
      CAPTURE(backend);
      CAPTURE(scenario);
      auto result = nano::test::run_command(
          {NANO_TEST_NANO_RUN, "-n", "2", "--backend", backend, "--oversubscribe", "--", kWorker, scenario});
      INFO("stdout:\n" << result.out << "stderr:\n" << result.err);
      CHECK(result.exit_code == 0);
      for (int r = 0; r < 2; ++r) CHECK(result.out.find(ok_line(scenario, r, 2, comm)) != std::string::npos);
    }
  }
}
#endif
