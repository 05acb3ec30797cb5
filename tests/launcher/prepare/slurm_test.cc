#include "launcher/prepare/slurm.h"

#include <doctest/doctest.h>

#include <nano/error.h>

using namespace nano;

namespace {
std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : " ") + s;
  return out;
}
}  // namespace

TEST_CASE("Slurm node lists: plain names") {
  CHECK(joined(expand_slurm_nodelist("hostA")) == "hostA");
  CHECK(joined(expand_slurm_nodelist("hostA,hostB")) == "hostA hostB");
}

TEST_CASE("Slurm node lists: ranges, padding, several groups") {
  CHECK(joined(expand_slurm_nodelist("node[01-03,7],login")) == "node01 node02 node03 node7 login");
  CHECK(joined(expand_slurm_nodelist("rack[1-2]-n[1-2]")) == "rack1-n1 rack1-n2 rack2-n1 rack2-n2");
  CHECK(joined(expand_slurm_nodelist("cn[9-11]")) == "cn9 cn10 cn11");
  CHECK(joined(expand_slurm_nodelist("a[008-010]")) == "a008 a009 a010");
  CHECK_THROWS_WITH_AS(expand_slurm_nodelist("node[1-3"), "bad Slurm node list 'node[1-3': unbalanced '['", UsageError);
  CHECK_THROWS_WITH_AS(expand_slurm_nodelist("node[3-1]"), "bad Slurm node list 'node[3-1]': range 3-1 runs backwards",
                       UsageError);
  CHECK_THROWS_WITH_AS(expand_slurm_nodelist("node[x]"), "bad Slurm node list 'node[x]': 'x' is not a number",
                       UsageError);
}

TEST_CASE("Slurm task counts") {
  CHECK(expand_slurm_counts("2(x3),1") == std::vector<int>{2, 2, 2, 1});
  CHECK(expand_slurm_counts("4") == std::vector<int>{4});
  CHECK_THROWS_WITH_AS(expand_slurm_counts("2(x"), "bad SLURM_TASKS_PER_NODE '2(x': expected counts like 2(x3),1",
                       UsageError);
}

TEST_CASE("the allocation's hosts from the variables salloc and sbatch set") {
  CHECK_FALSE(slurm_allocation_hosts({{"PATH", "/bin"}}).has_value());
  // As `salloc -N 3 --ntasks-per-node=2` sets them.
  CHECK(format_hosts(*slurm_allocation_hosts(
            {{"SLURM_JOB_ID", "7"}, {"SLURM_JOB_NODELIST", "cn[01-03]"}, {"SLURM_TASKS_PER_NODE", "2(x3)"}})) ==
        "cn01:2,cn02:2,cn03:2");
  // Uneven counts, the older variable name, and no counts at all.
  CHECK(format_hosts(*slurm_allocation_hosts({{"SLURM_NODELIST", "a,b"}, {"SLURM_TASKS_PER_NODE", "3,1"}})) ==
        "a:3,b:1");
  CHECK(format_hosts(*slurm_allocation_hosts({{"SLURM_JOB_NODELIST", "a,b"}})) == "a:1,b:1");
  CHECK_THROWS_WITH_AS(slurm_allocation_hosts({{"SLURM_JOB_NODELIST", "a,b"}, {"SLURM_TASKS_PER_NODE", "2(x3)"}}),
                       "the Slurm allocation lists 2 nodes (a,b) but 3 task counts (SLURM_TASKS_PER_NODE=2(x3))",
                       UsageError);
}

TEST_CASE("one nano-run per node under srun: which part of the world this node is") {
  const Environment step = {{"SLURM_JOB_ID", "12"},        {"SLURM_STEP_ID", "0"},
                            {"SLURM_NODEID", "1"},         {"SLURM_STEP_NUM_NODES", "2"},
                            {"SLURM_STEP_NUM_TASKS", "2"}, {"SLURM_STEP_NODELIST", "cn[07-08]"}};
  const auto part = slurm_node_part(step);
  REQUIRE(part.has_value());
  CHECK(part->node == 1);
  CHECK(part->nodes == 2);
  CHECK(part->master == "cn07");
  CHECK(part->port == 20000 + (12 * 101 + 0) % 30000);
  CHECK(part->run_id == "slurm-12.0");
  // A requeued job (same job and step ids) is another run: a checkpoint folder tells them apart.
  auto requeued = step;
  requeued["SLURM_RESTART_COUNT"] = "2";
  CHECK(slurm_node_part(requeued)->run_id == "slurm-12.0-r2");
  // Not a step of several tasks: salloc, sbatch's batch script, a plain shell.
  CHECK_FALSE(slurm_node_part({{"SLURM_JOB_ID", "12"}, {"SLURM_JOB_NODELIST", "cn[07-08]"}}).has_value());
  auto one_task = step;
  one_task["SLURM_STEP_NUM_TASKS"] = "1";
  one_task["SLURM_STEP_NUM_NODES"] = "1";
  CHECK_FALSE(slurm_node_part(one_task).has_value());
  auto two_per_node = step;
  two_per_node["SLURM_STEP_NUM_TASKS"] = "4";
  CHECK_THROWS_WITH_AS(slurm_node_part(two_per_node),
                       "this is one of 4 tasks of a Slurm step on 2 nodes: start one nano-run per node (srun "
                       "--ntasks-per-node=1), or one for the whole allocation (in the sbatch script or under salloc)",
                       UsageError);
}
