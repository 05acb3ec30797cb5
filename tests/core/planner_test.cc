#include "core/planner.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include <nano/error.h>
#include "core/cpulist.h"
#include "core/setting.h"
#include "machines.h"

using namespace nano;

namespace {

std::vector<std::string> lists(const Plan& plan) {
  std::vector<std::string> out;
  for (const RankPlan& r : plan.ranks) out.push_back(format_cpu_list(r.cpus));
  return out;
}

std::vector<int> threads(const Plan& plan) {
  std::vector<int> out;
  for (const RankPlan& r : plan.ranks) out.push_back(r.threads);
  return out;
}

PlanOptions n_ranks(int n) {
  PlanOptions o;
  o.num_processes = n;
  return o;
}

// What `plan` throws, as nano-run words it ("" when it does not throw a SettingError).
template <class F>
std::string nano_run_error(F plan) {
  try {
    plan();
  } catch (const SettingError& e) {
    return e.worded(command_line_flag);
  }
  return "";
}

using Lists = std::vector<std::string>;
using Notes = std::vector<std::string>;

}  // namespace

TEST_CASE("this machine: 1 package x 2 cores, no SMT") {
  const Topology t = load_synthetic_topology(nano_test::kTwoCores);
  CHECK(lists(make_plan(t, PlanOptions{})) == Lists{"0-1"});
  CHECK(threads(make_plan(t, PlanOptions{})) == std::vector<int>{2});
  CHECK(lists(make_plan(t, n_ranks(1))) == Lists{"0-1"});
  const Plan two = make_plan(t, n_ranks(2));
  CHECK(lists(two) == Lists{"0", "1"});
  CHECK(threads(two) == std::vector<int>{1, 1});
  CHECK(two.ranks[1].rank == 1);
  CHECK(two.ranks[1].numa_nodes == std::vector<int>{0});
  CHECK(two.notes.empty());
}

TEST_CASE("oversubscribed ranks share cores round-robin") {
  const Topology t = load_synthetic_topology(nano_test::kTwoCores);
  PlanOptions o = n_ranks(3);
  o.oversubscribe = true;
  const Plan p = make_plan(t, o);
  CHECK(lists(p) == Lists{"0", "1", "0"});
  CHECK(p.notes == Notes{"3 ranks share 2 usable physical cores (oversubscribed: ranks compete "
                         "for cores)"});
}

TEST_CASE("Linux numbering (sibling of i is i+16): ranks per package, siblings together") {
  const Topology t = load_synthetic_topology(nano_test::linux_two_socket());
  CHECK(lists(make_plan(t, n_ranks(2))) == Lists{"0-7", "8-15"});
  CHECK(lists(make_plan(t, n_ranks(4))) == Lists{"0-3", "4-7", "8-11", "12-15"});
  CHECK(lists(make_plan(t, n_ranks(16)))[15] == "15");
  PlanOptions logical = n_ranks(2);
  logical.use_logical_cores = true;
  const Plan lp = make_plan(t, logical);
  CHECK(lists(lp) == Lists{"0-7,16-23", "8-15,24-31"});
  CHECK(threads(lp) == std::vector<int>{16, 16});
  logical.num_processes = 4;
  CHECK(lists(make_plan(t, logical)) == Lists{"0-3,16-19", "4-7,20-23", "8-11,24-27", "12-15,28-31"});
  // 3 does not divide into the 2 packages: contiguous 6/5/5, the straddler is reported.
  const Plan three = make_plan(t, n_ranks(3));
  CHECK(lists(three) == Lists{"0-5", "6-10", "11-15"});
  CHECK(three.notes == Notes{"rank 1 spans packages 0 and 1"});
}

TEST_CASE("two packages x two NUMA nodes") {
  const Topology t = load_synthetic_topology(nano_test::kFourNuma);
  const Plan four = make_plan(t, n_ranks(4));
  for (int r = 0; r < 4; ++r) {
    CAPTURE(r);
    CHECK(four.ranks[r].numa_nodes == std::vector<int>{r});
    CHECK(four.ranks[r].threads == 8);
    CHECK(four.ranks[r].cpus.front() == 16 * r);
  }
  CHECK(four.notes.empty());
  CHECK(lists(make_plan(t, n_ranks(8)))[1] == "8,10,12,14");
  const Plan two = make_plan(t, n_ranks(2));
  CHECK(two.ranks[0].numa_nodes == std::vector<int>{0, 1});
  CHECK(two.notes == Notes{"rank 0 spans NUMA nodes 0 and 1", "rank 1 spans NUMA nodes 2 and 3"});
  const Plan three = make_plan(t, n_ranks(3));
  CHECK(threads(three) == std::vector<int>{11, 11, 10});
  CHECK(three.notes ==
        Notes{"rank 0 spans NUMA nodes 0 and 1", "rank 1 spans NUMA nodes 1 and 2", "rank 2 spans NUMA nodes 2 and 3"});
  CHECK(make_plan(t, n_ranks(1)).notes == Notes{"rank 0 spans NUMA nodes 0, 1, 2 and 3"});
}

TEST_CASE("L3 domains are kept whole when the count allows") {
  const Topology t = load_synthetic_topology(nano_test::kL3Split);
  CHECK(lists(make_plan(t, n_ranks(4))) == Lists{"0,2,4,6", "8,10,12,14", "16,18,20,22", "24,26,28,30"});
  CHECK(make_plan(t, n_ranks(4)).notes.empty());
}

TEST_CASE("N not dividing the cores spreads the remainder: 43/43/42") {
  const Topology t = load_synthetic_topology("core:128 pu:1");
  const Plan p = make_plan(t, n_ranks(3));
  CHECK(threads(p) == std::vector<int>{43, 43, 42});
  CHECK(lists(p) == Lists{"0-42", "43-85", "86-127"});
  CHECK(p.notes.empty());
  CHECK(threads(make_plan(t, n_ranks(5))) == std::vector<int>{26, 26, 26, 25, 25});
}

TEST_CASE("a restricted allowed set (container cpuset)") {
  const Topology t = load_synthetic_topology(nano_test::linux_two_socket(), "0-5,16-21");
  CHECK(lists(make_plan(t, n_ranks(2))) == Lists{"0-2", "3-5"});
  PlanOptions logical = n_ranks(2);
  logical.use_logical_cores = true;
  CHECK(lists(make_plan(t, logical)) == Lists{"0-2,16-18", "3-5,19-21"});
  CHECK(nano_run_error([&] { make_plan(t, n_ranks(7)); }) ==
        "--num-processes 7 is more than the 6 usable physical cores (use "
        "--oversubscribe to share cores)");
  // Only one sibling allowed on some cores: a core still counts once.
  const Topology half = load_synthetic_topology(nano_test::linux_two_socket(), "0-3,16-17");
  CHECK(lists(make_plan(half, n_ranks(2))) == Lists{"0-1", "2-3"});
  logical.num_processes = 2;
  CHECK(lists(make_plan(half, logical)) == Lists{"0-1,16-17", "2-3"});
  // Unequal packages in one NUMA node: balance wins over package boundaries.
  const Topology skew = load_synthetic_topology(nano_test::linux_two_socket(), "0-5,8-9");
  CHECK(lists(make_plan(skew, n_ranks(2))) == Lists{"0-3", "4-5,8-9"});
  // Unequal NUMA nodes: each rank stays in its node, the imbalance is reported.
  const Topology numa_skew = load_synthetic_topology(nano_test::kFourNuma, "0-11,16-19");
  const Plan p = make_plan(numa_skew, n_ranks(2));
  CHECK(lists(p) == Lists{"0,2,4,6,8,10", "16,18"});
  CHECK(p.notes == Notes{"ranks get 2 to 6 cores so that each stays inside its NUMA node (the "
                         "nodes have unequal usable cores)"});
}

TEST_CASE("hybrid CPU: performance cores unless efficiency cores are asked for") {
  const Topology t = load_xml_topology(nano_test::hybrid_xml());
  const Plan p = make_plan(t, n_ranks(2));
  CHECK(lists(p) == Lists{"0,2,4,6", "8,10,12,14"});
  CHECK(p.notes == Notes{"efficiency cores (CPUs 16,18,20,22) are left out; {use_efficiency_cores} uses them"});
  CHECK(worded_text(p.notes[0], command_line_flag) ==
        "efficiency cores (CPUs 16,18,20,22) are left out; --use-efficiency-cores uses them");
  CHECK(nano_run_error([&] { make_plan(t, n_ranks(9)); }) ==
        "--num-processes 9 is more than the 8 usable physical cores (use "
        "--oversubscribe to share cores)");
  PlanOptions e = n_ranks(3);
  e.use_efficiency_cores = true;
  const Plan pe = make_plan(t, e);
  CHECK(lists(pe) == Lists{"0,2,4,6", "8,10,12,14", "16,18,20,22"});
  CHECK(pe.notes.empty());
  // The same hybrid machine built by hand, as a front end might describe it.
  Topology hand;
  hand.source = "hand";
  hand.packages = 1;
  hand.numa_nodes = {0};
  hand.l3_domains = 1;
  hand.hybrid = true;
  for (int i = 0; i < 6; ++i) {
    Core c;
    c.os_index = i;
    c.logical_index = i;
    c.efficiency = i >= 2;
    c.pus = i < 2 ? std::vector<int>{i, i + 6} : std::vector<int>{i};
    hand.cores.push_back(c);
  }
  hand.present_pus = hand.allowed_pus = {0, 1, 2, 3, 4, 5, 6, 7};
  CHECK(lists(make_plan(hand, PlanOptions{})) == Lists{"0-1"});
  PlanOptions all;
  all.use_efficiency_cores = true;
  all.num_processes = 2;
  CHECK(lists(make_plan(hand, all)) == Lists{"0-2", "3-5"});
}

TEST_CASE("cores per process") {
  const Topology t = load_synthetic_topology(nano_test::linux_two_socket());
  PlanOptions o;
  o.cores_per_process = 4;
  CHECK(lists(make_plan(t, o)) == Lists{"0-3", "4-7", "8-11", "12-15"});
  o.cores_per_process = 3;
  const Plan five = make_plan(t, o);
  CHECK(lists(five) == Lists{"0-2", "3-5", "6-8", "9-11", "12-14"});
  CHECK(five.notes == Notes{"1 of the 16 usable physical cores stay idle (CPUs 15): 5 ranks x 3 "
                            "cores",
                            "rank 2 spans packages 0 and 1"});
  o.num_processes = 2;
  o.cores_per_process = 4;
  CHECK(lists(make_plan(t, o)) == Lists{"0-3", "8-11"});
  o.oversubscribe = true;
  o.num_processes = 3;
  o.cores_per_process = 8;
  CHECK(lists(make_plan(t, o)) == Lists{"0-7", "8-15", "0-7"});
}

TEST_CASE("explicit CPU lists per rank") {
  const Topology t = load_synthetic_topology(nano_test::linux_two_socket());
  PlanOptions o;
  o.cpu_for_each_process = {{0, 1, 2, 3}, {4, 5, 6, 7, 20}};
  const Plan p = make_plan(t, o);
  CHECK(lists(p) == Lists{"0-3", "4-7,20"});
  CHECK(threads(p) == std::vector<int>{4, 4});
  o.cpu_for_each_process = {{3, 2, 1, 0, 0}, {4, 5, 6, 7}};  // sorted, duplicates dropped
  o.num_processes = 2;
  CHECK(lists(make_plan(t, o)) == Lists{"0-3", "4-7"});
  o.num_processes = 0;
  o.cpu_for_each_process = {{0}, {16}};
  CHECK(make_plan(t, o).notes == Notes{"ranks 0 and 1 share the physical core of CPUs 0,16"});
  o.cpu_for_each_process = {{7, 8}};
  CHECK(make_plan(t, o).notes == Notes{"rank 0 spans packages 0 and 1"});
}

TEST_CASE("every error has its exact text") {
  const Topology two = load_synthetic_topology(nano_test::kTwoCores);
  const Topology four_of_32 = load_synthetic_topology(nano_test::linux_two_socket(), "0-1");
  struct Row {
    const Topology* topology;
    PlanOptions options;
    std::string message;
  };
  // nano-run's and nano-init's names; the C++ API's are checked below.
  auto with = [](int n, int k, std::vector<std::vector<int>> lists) {
    PlanOptions o;
    o.num_processes = n;
    o.cores_per_process = k;
    o.cpu_for_each_process = std::move(lists);
    return o;
  };
  const std::vector<Row> table = {
      {&two, with(-1, 0, {}), "--num-processes must be at least 1, got -1"},
      {&two, with(5, 0, {}),
       "--num-processes 5 is more than the 2 usable physical cores (use --oversubscribe to "
       "share cores)"},
      {&two, with(0, -2, {}), "--cores-per-process must be at least 1, got -2"},
      {&two, with(0, 3, {}), "--cores-per-process 3 is more than the 2 usable physical cores"},
      {&two, with(2, 2, {}),
       "--num-processes 2 with --cores-per-process 2 needs 4 physical cores but there are only 2 "
       "usable physical cores (use --oversubscribe to share cores)"},
      {&two, with(0, 0, {{0}, {}, {1}}), "--cpu-for-each-process: the CPU list of rank 1 is empty"},
      {&two, with(0, 0, {{0}, {99}}), "--cpu-for-each-process: CPU 99 does not exist on this machine"},
      {&two, with(0, 0, {{-2}}), "--cpu-for-each-process: CPU -2 does not exist on this machine"},
      {&four_of_32, with(0, 0, {{0}, {3}}), "--cpu-for-each-process: CPU 3 is not allowed (allowed: 0-1)"},
      {&two, with(0, 0, {{0, 1}, {1}}), "--cpu-for-each-process: CPU 1 is listed for rank 0 and rank 1"},
      {&two, with(2, 0, {{0}, {1}, {0}}), "--cpu-for-each-process gives 3 lists but --num-processes is 2"},
      {&two, with(2, 0, {{0}}), "--cpu-for-each-process gives 1 list but --num-processes is 2"},
      {&two, with(0, 1, {{0}, {1}}), "--cpu-for-each-process and --cores-per-process cannot be used together"},
  };
  for (const Row& row : table) {
    CAPTURE(row.message);
    CHECK(nano_run_error([&] { make_plan(*row.topology, row.options); }) == row.message);
  }
  CHECK(nano_run_error([] { check_num_processes(0); }) == "--num-processes must be at least 1, got 0");
  CHECK_NOTHROW(check_num_processes(1));
}

TEST_CASE("errors say which setting and value, and each front end names the setting") {
  const Topology two = load_synthetic_topology(nano_test::kTwoCores);
  PlanOptions o;  // unworded, an error names the settings by their keys (TorchNanoOptions' fields)
  o.num_processes = 2;
  o.cpu_for_each_process = {{0}};
  CHECK_THROWS_WITH_AS(make_plan(two, o), "cpu_for_each_process gives 1 list but num_processes is 2", UsageError);
  o.cpu_for_each_process = {};
  o.num_processes = 5;
  CHECK_THROWS_WITH_AS(make_plan(two, o),
                       "num_processes 5 is more than the 2 usable physical cores (use oversubscribe to share cores)",
                       UsageError);
  CHECK(nano_run_error([&] { make_plan(two, o); }) ==
        "--num-processes 5 is more than the 2 usable physical cores (use --oversubscribe to share cores)");
  try {
    make_plan(two, o);
    FAIL("no error");
  } catch (const SettingError& e) {
    CHECK(e.setting() == Setting::kNumProcesses);
    CHECK(e.value() == "5");
  }
}

TEST_CASE("plan properties over many machines and rank counts") {
  struct Machine {
    std::string desc;
    std::string allowed;
  };
  const std::vector<Machine> machines = {
      {nano_test::kTwoCores, ""},
      {nano_test::linux_two_socket(), ""},
      {nano_test::linux_two_socket(), "0-5,16-21"},
      {nano_test::linux_two_socket(), "2-13,18,20,22,24,26"},
      {nano_test::kFourNuma, ""},
      {nano_test::kFourNuma, "0-47"},
      {nano_test::kFourNuma, "2-13,16-31,34-45,48-63"},
      {nano_test::kL3Split, ""},
      {"pack:4 numa:2 l3:2 core:6 pu:2", ""},
      {"pack:2 core:12 pu:4", "0-40"},
      {"core:7 pu:3", ""},
  };
  for (const Machine& m : machines) {
    const Topology t = load_synthetic_topology(m.desc, m.allowed);
    const int cores = static_cast<int>(t.cores.size());
    std::map<int, const Core*> core_of;
    for (const Core& c : t.cores)
      for (int pu : c.pus) core_of[pu] = &c;
    for (bool logical : {false, true}) {
      for (int n = 1; n <= cores; ++n) {
        CAPTURE(m.desc);
        CAPTURE(m.allowed);
        CAPTURE(n);
        CAPTURE(logical);
        PlanOptions o = n_ranks(n);
        o.use_logical_cores = logical;
        const Plan p = make_plan(t, o);
        REQUIRE(p.ranks.size() == static_cast<std::size_t>(n));
        std::map<int, int> owner_of_pu;
        std::map<const Core*, std::set<int>> owners_of_core;
        int total_threads = 0;
        for (const RankPlan& r : p.ranks) {
          CHECK_FALSE(r.cpus.empty());
          total_threads += r.threads;
          std::set<int> nodes;
          for (int cpu : r.cpus) {
            CHECK(owner_of_pu.emplace(cpu, r.rank).second);  // disjoint
            REQUIRE(core_of.count(cpu) == 1);                // allowed
            owners_of_core[core_of[cpu]].insert(r.rank);
            nodes.insert(core_of[cpu]->numa_node);
          }
          CHECK(r.numa_nodes == std::vector<int>(nodes.begin(), nodes.end()));
        }
        // Every usable physical core used, no SMT pair split.
        CHECK(owners_of_core.size() == t.cores.size());
        for (const auto& [core, owners] : owners_of_core) CHECK(owners.size() == 1);
        if (!logical) CHECK(total_threads == cores);
        if (logical) CHECK(owner_of_pu.size() == t.allowed_pus.size());
        // No rank across NUMA nodes when N is a multiple of the node count (and nodes can
        // hold N/nodes ranks each).
        const int nodes = static_cast<int>(t.numa_nodes.size());
        bool fits = n % nodes == 0;
        for (int node : t.numa_nodes) {
          int in_node = 0;
          for (const Core& c : t.cores) in_node += c.numa_node == node;
          fits = fits && in_node >= n / nodes;
        }
        if (fits)
          for (const RankPlan& r : p.ranks) CHECK(r.numa_nodes.size() == 1);
        // Sizes differ by at most one unless NUMA nodes are unequal.
        if (p.notes.empty() || p.notes[0].rfind("ranks get", 0) != 0) {
          int low = cores, high = 0;
          for (const RankPlan& r : p.ranks) {
            const int owned =
                static_cast<int>(std::count_if(owners_of_core.begin(), owners_of_core.end(),
                                               [&](const auto& entry) { return entry.second.count(r.rank); }));
            low = std::min(low, owned);
            high = std::max(high, owned);
          }
          CHECK(high - low <= 1);
        }
      }
    }
  }
}
