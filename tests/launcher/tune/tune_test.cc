// The tuning's pure parts: which layouts a machine offers (synthetic and saved hwloc
// topologies), how trials' figures become a choice (ties within noise, failures), and the
// store's text, lookups and damage.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <string>
#include <vector>

#include <nano/error.h>
#include "core/setting.h"
#include "launcher/tune/tune_candidates.h"
#include "launcher/tune/tune_choice.h"
#include "launcher/tune/tune_store.h"
#include "launcher/tune/tuner.h"

using namespace nano;

namespace {

std::vector<int> counts_of(const std::string& synthetic, const std::string& allowed = "", PlanOptions plan = {}) {
  return even_rank_counts(load_synthetic_topology(synthetic, allowed), plan);
}

// A trial that measured `rate` with relative noise `noise`.
TrialMeasure good(double rate, double noise = 0.005) {
  TrialMeasure m;
  m.ok = true;
  m.rate = rate;
  m.noise = noise;
  m.steps = 20;
  m.seconds = 2;
  return m;
}

TrialMeasure failed(const std::string& why) {
  TrialMeasure m;
  m.failure = why;
  return m;
}

LayoutTrials layout(int ranks, std::vector<TrialMeasure> trials, Allocator a = Allocator::kAutomatic) {
  return {Layout{ranks, 1, a}, std::move(trials)};
}

}  // namespace

TEST_CASE("even rank counts follow packages, NUMA nodes and L3 domains") {
  struct Row {
    const char* machine;
    std::string synthetic, allowed;
    std::vector<int> want;
  };
  const Row rows[] = {
      {"this VM: 2 cores", "core:2 pu:1", "", {1, 2}},
      {"1 package of 8 cores", "core:8 pu:1", "", {1, 2, 4, 8}},
      {"2 sockets x 8 cores x SMT2", "pack:2 core:8 pu:2", "", {1, 2, 4, 8, 16}},
      {"2 sockets x 2 NUMA x 8 cores", "pack:2 numa:2 core:8 pu:2", "", {1, 2, 4, 8, 16, 32}},
      // 2 x 28 cores: 8 cores a rank (7 ranks) would cross a socket, 16 ranks leave 56 uneven
      {"2 sockets x 28 cores", "pack:2 core:28 pu:1", "", {1, 2, 4, 8, 14, 28, 56}},
      {"2 sockets x 2 L3 x 4 cores (AMD-like)", "pack:2 [numa] l3:2 core:4 pu:2", "", {1, 2, 4, 8, 16}},
      // 3 sockets x 4 cores: 2 or 4 ranks would cross a socket
      {"3 sockets x 4 cores", "pack:3 core:4 pu:1", "", {1, 3, 6, 12}},
      // a container allowed 6 of 16 cores, 4 on one socket and 2 on the other: 2 ranks of 3
      // would cross
      {"a cgroup-limited container", "pack:2 core:8 pu:1", "0-3,8-9", {1, 3, 6}},
  };
  for (const Row& r : rows) {
    CAPTURE(r.machine);
    CHECK(counts_of(r.synthetic, r.allowed) == r.want);
  }
}

TEST_CASE("even rank counts leave out a hybrid CPU's efficiency cores as the planner does") {
  const Topology hybrid = load_xml_topology(std::string(NANO_TEST_DATA_DIR) + "/hybrid.xml");
  CHECK(even_rank_counts(hybrid, {}) == std::vector<int>{1, 2, 4, 8});
  PlanOptions with_e;
  with_e.use_efficiency_cores = true;
  CHECK(even_rank_counts(hybrid, with_e) == std::vector<int>{1, 2, 3, 4, 6, 12});  // one L3: any even split
}

TEST_CASE("candidate layouts: counts x allocators, the planner's threads, the cap") {
  const Topology t = load_synthetic_topology("pack:2 core:4 pu:2");
  RecipeOptions recipe;
  CandidateRequest request;
  std::vector<Layout> got = candidate_layouts(t, {}, recipe, request);
  CHECK(got == std::vector<Layout>{{1, 8, Allocator::kAutomatic},
                                   {2, 4, Allocator::kAutomatic},
                                   {4, 2, Allocator::kAutomatic},
                                   {8, 1, Allocator::kAutomatic}});
  request.max_ranks = 2;
  request.allocators = {Allocator::kJemalloc, Allocator::kSystem};
  got = candidate_layouts(t, {}, recipe, request);
  CHECK(got == std::vector<Layout>{{1, 8, Allocator::kJemalloc},
                                   {1, 8, Allocator::kSystem},
                                   {2, 4, Allocator::kJemalloc},
                                   {2, 4, Allocator::kSystem}});
  CHECK(layout_text(got[2]) == "2 ranks x 4 threads, jemalloc");
  CHECK(layout_text(Layout{1, 1, Allocator::kAutomatic}) == "1 rank x 1 thread, automatic allocator");
  // The user's list, sorted; one the planner cannot fit is named.
  request = {};
  request.rank_counts = {3, 1};
  got = candidate_layouts(t, {}, recipe, request);
  REQUIRE(got.size() == 2);
  CHECK(got[0].ranks == 1);
  CHECK(got[1].ranks == 3);
  CHECK(got[1].threads == 3);  // 8 cores as 3/3/2: rank 0's
  request.rank_counts = {2, 64};
  try {
    candidate_layouts(t, {}, recipe, request);
    FAIL("no error");
  } catch (const SettingError& e) {
    CHECK(e.setting() == Setting::kTuneCandidates);
    CHECK(e.worded(command_line_flag) ==
          "--tune-candidates 64 is more than the 8 usable physical cores (use --oversubscribe to share cores)");
  }
  request.rank_counts = {4};
  request.max_ranks = 2;
  CHECK_THROWS_WITH_AS(candidate_layouts(t, {}, recipe, request), "max_ranks 2 leaves no candidate of tune_candidates",
                       SettingError);
}

TEST_CASE("the candidate and allocator lists: each bad entry named") {
  CHECK(parse_rank_counts("1,2,4") == std::vector<int>{1, 2, 4});
  CHECK(parse_rank_counts("4,2,4") == std::vector<int>{4, 2});
  CHECK(parse_allocator_list("jemalloc,tcmalloc,default") ==
        std::vector<Allocator>{Allocator::kJemalloc, Allocator::kTcmalloc, Allocator::kSystem});
  struct Bad {
    const char* text;
    bool ranks;
    const char* message;
  };
  const Bad rows[] = {
      {"1,x", true, "--tune-candidates expects rank counts such as 1,2,4; 'x' in '1,x' is not a count of at least 1"},
      {"0", true, "--tune-candidates expects rank counts such as 1,2,4; '0' in '0' is not a count of at least 1"},
      {"1,", true, "--tune-candidates expects rank counts such as 1,2,4, got '1,'"},
      {"", true, "--tune-candidates expects rank counts such as 1,2,4, got ''"},
      {"jemalloc,mimalloc", false,
       "--tune-allocators expects jemalloc, tcmalloc or default (the C library's malloc); 'mimalloc' in "
       "'jemalloc,mimalloc' is none of them"},
  };
  for (const Bad& b : rows) {
    CAPTURE(b.text);
    try {
      if (b.ranks)
        parse_rank_counts(b.text);
      else
        parse_allocator_list(b.text);
      FAIL("no error");
    } catch (const SettingError& e) {
      CHECK(e.worded(command_line_flag) == b.message);
    }
  }
}

TEST_CASE("a trial's figures from its step times, warm-up left out") {
  // Rank 0: 3 slow warm-up steps, then a step every 0.1 s of 32 samples; rank 1 the same.
  StepLog log;
  for (double t : {1.0, 2.0, 2.5, 3.0, 3.1, 3.2, 3.3, 3.4}) {
    log.ends.push_back(t);
    log.samples.push_back(32);
  }
  TrialMeasure m = measure_steps({log, log}, 3);
  REQUIRE(m.ok);
  CHECK(m.unit == RateUnit::kSamples);
  CHECK(m.steps == 4);
  CHECK(m.seconds == doctest::Approx(0.4));
  CHECK(m.rate == doctest::Approx(2 * 4 * 32 / 0.4));  // both ranks' samples
  CHECK(m.noise == doctest::Approx(0).epsilon(1e-6));
  // Unknown samples: steps summed over ranks.
  for (auto& s : log.samples) s = 0;
  m = measure_steps({log, log}, 3);
  CHECK(m.unit == RateUnit::kRankSteps);
  CHECK(m.rate == doctest::Approx(2 * 4 / 0.4));
  // Too few steps after the warm-up.
  log.ends.resize(4);
  log.samples.resize(4);
  m = measure_steps({log}, 3);
  CHECK_FALSE(m.ok);
  CHECK(m.failure == "rank 0 measured 1 steps after its warm-up of 3 (at least 2 needed)");
  // The program's own figures.
  m = measure_metric({1, 2, 100, 101, 99, 100}, 2);
  REQUIRE(m.ok);
  CHECK(m.unit == RateUnit::kMetric);
  CHECK(m.rate == doctest::Approx(100));
  CHECK(m.steps == 4);
  CHECK_FALSE(measure_metric({5, 6}, 3).ok);
}

TEST_CASE("measure_rank_metrics: each rank's own figure, summed") {
  struct Row {
    std::vector<std::vector<double>> ranks;
    int warmup;
    bool ok;
    double rate;
    int steps;
    std::string failure;
  };
  const std::vector<Row> table = {
      // One rank: its median.
      {{{1, 100, 100, 100}}, 1, true, 100, 3, ""},
      // Two ranks printing 90 each: the job does 180, more than one rank's 100.
      {{{0, 90, 90, 90}, {0, 90, 90}}, 1, true, 180, 2, ""},
      // Each rank's median, whatever the others print.
      {{{5, 10, 30, 20}, {5, 40, 40, 41}}, 1, true, 60, 3, ""},
      // A rank without a value after its warm-up: nothing is measured.
      {{{0, 90, 90}, {0}}, 1, false, 0, 0, "rank 1: the metric appeared 1 times, not after the warm-up of 1"},
      {{}, 0, false, 0, 0, "no rank printed the metric"},
  };
  for (const Row& row : table) {
    CAPTURE(row.failure);
    const TrialMeasure m = measure_rank_metrics(row.ranks, row.warmup);
    CHECK(m.ok == row.ok);
    CHECK(m.failure == row.failure);
    CHECK(m.unit == RateUnit::kRankMetric);
    if (!row.ok) continue;
    CHECK(m.rate == doctest::Approx(row.rate));
    CHECK(m.steps == row.steps);
  }
  // The noise of a sum: the ranks' own noises combined, relative to the sum.
  const TrialMeasure noisy = measure_rank_metrics({{90, 110, 90, 110}, {100, 100, 100, 100}}, 0);
  CHECK(noisy.noise == doctest::Approx(measure_metric({90, 110, 90, 110}, 0).noise * 100 / 200));
}

TEST_CASE("the ranking: the fastest wins, within noise the fewest ranks") {
  // Clear winner.
  std::vector<LayoutTrials> l = {layout(1, {good(100)}), layout(2, {good(180)}), layout(4, {good(150)})};
  Ranking r = rank_layouts(l);
  REQUIRE(r.winner);
  CHECK(*r.winner == 1);
  CHECK(r.order == std::vector<std::size_t>{1, 2, 0});
  CHECK(r.tie.empty());
  // 4 ranks 1 % faster than 2 ranks: within the noise floor, so 2 ranks win, and it is said.
  l = {layout(1, {good(100)}), layout(2, {good(180)}), layout(4, {good(181.8)})};
  r = rank_layouts(l);
  CHECK(*r.winner == 1);
  CHECK(r.order.front() == 2);
  CHECK(r.tie ==
        "2 ranks x 1 thread, automatic allocator is within 0.99 % of 4 ranks x 1 thread, automatic "
        "allocator (noise 2.00 %): fewer ranks win");
  // A noisy fastest layout widens the tie: 10 % apart, 6 % noise within trials (x2 = 12 %).
  l = {layout(2, {good(100)}), layout(4, {good(110, 0.06)})};
  CHECK(*rank_layouts(l).winner == 0);
  // Trials that disagree widen it too: 4 ranks measured 100 and 130 (a standard error of 15,
  // 13 %; twice that 26 %).
  l = {layout(2, {good(105)}), layout(4, {good(100), good(130)})};
  r = rank_layouts(l);
  CHECK(r.rate[1] == doctest::Approx(115));
  CHECK(r.noise[1] == doctest::Approx(2 * 15.0 / 115));
  CHECK(*r.winner == 0);
  // More trials narrow it: 5 % faster with 4 % noise in each of 4 trials (2 % pooled, 4 % as
  // the noise) is no tie, where one such trial each (8 %) was.
  l = {layout(2, {good(100, 0.04)}), layout(4, {good(105, 0.04)})};
  CHECK(*rank_layouts(l).winner == 0);
  l = {layout(2, std::vector<TrialMeasure>(4, good(100, 0.04))),
       layout(4, std::vector<TrialMeasure>(4, good(105, 0.04)))};
  CHECK(*rank_layouts(l).winner == 1);
  // Failed layouts are last and never win; every layout failed: no winner.
  l = {layout(1, {good(100)}), layout(8, {failed("rank 3 was killed by SIGKILL")}), layout(2, {good(150)})};
  r = rank_layouts(l);
  CHECK(*r.winner == 2);
  CHECK(r.order == std::vector<std::size_t>{2, 0, 1});
  CHECK(r.rate[1] == 0);
  l = {layout(1, {failed("a")}), layout(2, {failed("b")})};
  CHECK_FALSE(rank_layouts(l).winner);
  // Same rank count, two allocators within noise: the first given.
  l = {layout(2, {good(100)}, Allocator::kJemalloc), layout(2, {good(101)}, Allocator::kSystem)};
  CHECK(*rank_layouts(l).winner == 0);
}

TEST_CASE("contenders and when the ranking is settled") {
  std::vector<LayoutTrials> l = {layout(1, {good(100)}), layout(2, {good(180)}), layout(4, {good(170)}),
                                 layout(8, {failed("x")})};
  Ranking r = rank_layouts(l);
  // 170 is within 3 x 2 % of 180; 100 and the failed one are out.
  CHECK(contenders(l, r) == std::vector<std::size_t>{1, 2});
  CHECK_FALSE(ranking_settled(std::nullopt, r, 2, 1, 3));  // one round is never enough with two
  CHECK(ranking_settled(std::nullopt, r, 1, 1, 3));        // a single contender
  CHECK(ranking_settled(1, r, 2, 2, 3));                   // the same winner twice
  CHECK_FALSE(ranking_settled(2, r, 2, 2, 3));             // it changed: once more
  CHECK(ranking_settled(2, r, 2, 3, 3));                   // the rounds are spent
  l = {layout(1, {failed("a")})};
  CHECK(ranking_settled(std::nullopt, rank_layouts(l), 0, 1, 3));
}

TEST_CASE("the store: text round trip, hits, misses, damage") {
  const Topology two = load_synthetic_topology("core:2 pu:1");
  const Topology four = load_synthetic_topology("core:4 pu:1");
  const Topology limited = load_synthetic_topology("core:4 pu:1", "0-1");
  CHECK(topology_fingerprint(two) != topology_fingerprint(four));
  CHECK(topology_fingerprint(two) != topology_fingerprint(limited));  // a cgroup limit is another machine
  CHECK(topology_fingerprint(two) == topology_fingerprint(load_synthetic_topology("core:2 pu:1")));

  TuneEntry e;
  e.fingerprint = topology_fingerprint(two);
  e.program = {"/usr/bin/train", "--epochs", "3"};
  e.layout = {2, 1, Allocator::kJemalloc};
  e.rate = 812.5;
  e.unit = "samples/s";
  e.ratio_to_one = 1.6;
  e.tuned_at = "2026-12-02T05:10:00Z";
  e.candidates = 2;
  const std::vector<TuneEntry> entries = parse_tune_store(tune_store_text({e}));
  REQUIRE(entries.size() == 1);
  CHECK(entries[0].layout == e.layout);
  CHECK(entries[0].program == e.program);
  CHECK(entries[0].rate == 812.5);
  CHECK(entries[0].tuned_at == e.tuned_at);

  CHECK(find_tune_entry(entries, e.fingerprint, e.program));                             // a hit
  CHECK_FALSE(find_tune_entry(entries, e.fingerprint, {"/usr/bin/train", "--epochs"}));  // other arguments
  CHECK_FALSE(find_tune_entry(entries, topology_fingerprint(four), e.program));          // another machine

  TuneEntry again = e;
  again.layout = {1, 2, Allocator::kSystem};
  std::vector<TuneEntry> replaced = with_tune_entry(entries, again);
  REQUIRE(replaced.size() == 1);
  CHECK(replaced[0].layout == again.layout);
  again.program = {"/usr/bin/other"};
  CHECK(with_tune_entry(replaced, again).size() == 2);

  CHECK_THROWS_WITH_AS(parse_tune_store("{\"entries\": 3}"), "no \"entries\" list", Error);
  CHECK_THROWS_AS(parse_tune_store("not json"), Error);
  CHECK_THROWS_AS(parse_tune_store(R"({"entries": [{"machine": "m", "program": ["p"], "layout": {"ranks": 0,
                     "threads": 1, "allocator": "auto"}}]})"),
                  Error);
  CHECK_THROWS_AS(parse_tune_store(R"({"entries": [{"machine": "m"}]})"), Error);

  // Written whole through a temporary file of an unguessable name, 0600, that does not stay.
  char pattern[] = "/tmp/nano_tune_store_test_XXXXXX";
  REQUIRE(mkdtemp(pattern) != nullptr);
  const std::string dir = pattern, path = dir + "/cache/tune.json";
  write_tune_store(path, replaced);
  write_tune_store(path, replaced);  // again, over the first
  CHECK(read_tune_store(path, nullptr).size() == 1);
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/cache"))
    names.push_back(entry.path().filename());
  CHECK(names == std::vector<std::string>{"tune.json"});
  std::filesystem::remove_all(dir);
}

TEST_CASE("a DDP program's steps from its all-reduces: the period of their sizes") {
  struct Row {
    const char* what;
    std::vector<long long> bytes;
    std::vector<std::size_t> step_ends;  // indexes of the all-reduces that end a step
  };
  const Row rows[] = {
      {"one bucket: each all-reduce a step", {400, 400, 400, 400}, {0, 1, 2, 3}},
      {"three buckets", {9, 5, 7, 9, 5, 7, 9, 5, 7}, {2, 5, 8}},
      // torch's first iteration all-reduces in another order (before its buckets are rebuilt)
      {"a first step unlike the others", {1, 2, 3, 9, 5, 9, 5, 9, 5, 9, 5}, {4, 6, 8, 10}},
      {"stopped in the middle of a step", {9, 5, 7, 9, 5, 7, 9, 5, 7, 9}, {3, 6, 9}},
      {"an extra all-reduce each step (a loss average)", {8, 8, 1, 8, 8, 1, 8, 8, 1}, {2, 5, 8}},
      {"no period", {1, 2, 3, 4, 5, 6}, {}},
      {"too short to tell", {5, 5}, {}},
  };
  for (const Row& r : rows) {
    CAPTURE(r.what);
    CollectiveLog log;
    for (std::size_t i = 0; i < r.bytes.size(); ++i) {
      log.ends.push_back(10.0 + static_cast<double>(i));
      log.bytes.push_back(r.bytes[i]);
    }
    const StepLog steps = steps_from_collectives(log);
    std::vector<std::size_t> got;
    for (double t : steps.ends) got.push_back(static_cast<std::size_t>(t - 10.0));
    CHECK(got == r.step_ends);
    CHECK(steps.samples == std::vector<long long>(got.size(), 0));
  }
}

TEST_CASE("a Python program on the nano backend: named in its text or its arguments") {
  CHECK(names_nano_backend("import nano_torch\n", {}));
  CHECK(names_nano_backend("dist.init_process_group('nano')", {}));
  CHECK(names_nano_backend("dist.init_process_group(backend=\"nano\")", {}));
  CHECK(names_nano_backend("dist.init_process_group(args.backend)", {"--backend", "nano"}));
  CHECK_FALSE(names_nano_backend("dist.init_process_group('gloo')  # nanoseconds", {"--nanos"}));
}
