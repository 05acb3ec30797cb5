#include "core/topology.h"

#include <doctest/doctest.h>

#include <cstdlib>

#include <nano/error.h>
#include "core/cpulist.h"
#include "machines.h"

using namespace nano;

TEST_CASE("two cores without SMT") {
  const Topology t = load_synthetic_topology(nano_test::kTwoCores);
  CHECK(t.source == "synthetic: core:2 pu:1");
  CHECK(t.packages == 1);
  CHECK(t.numa_nodes == std::vector<int>{0});
  REQUIRE(t.cores.size() == 2);
  CHECK(t.cores[0].pus == std::vector<int>{0});
  CHECK(t.cores[1].pus == std::vector<int>{1});
  CHECK(t.cores[1].logical_index == 1);
  CHECK(t.smt() == 1);
  CHECK_FALSE(t.hybrid);
  CHECK(t.present_pus == std::vector<int>{0, 1});
  CHECK(t.allowed_pus == std::vector<int>{0, 1});
}

TEST_CASE("Linux numbering: sibling of CPU i is i+16") {
  const Topology t = load_synthetic_topology(nano_test::linux_two_socket());
  CHECK(t.packages == 2);
  REQUIRE(t.cores.size() == 16);
  CHECK(t.smt() == 2);
  for (int i = 0; i < 16; ++i) {
    CAPTURE(i);
    CHECK(t.cores[i].pus == std::vector<int>{i, i + 16});
    CHECK(t.cores[i].package == i / 8);
  }
  CHECK(format_cpu_list(t.present_pus) == "0-31");
}

TEST_CASE("two packages x two NUMA nodes") {
  const Topology t = load_synthetic_topology(nano_test::kFourNuma);
  CHECK(t.packages == 2);
  CHECK(t.numa_nodes == std::vector<int>{0, 1, 2, 3});
  REQUIRE(t.cores.size() == 32);
  for (int i = 0; i < 32; ++i) {
    CAPTURE(i);
    CHECK(t.cores[i].numa_node == i / 8);
    CHECK(t.cores[i].package == i / 16);
    CHECK(t.cores[i].pus == std::vector<int>{2 * i, 2 * i + 1});
  }
}

TEST_CASE("L3 domains are recorded") {
  const Topology t = load_synthetic_topology(nano_test::kL3Split);
  CHECK(t.l3_domains == 4);
  CHECK(t.numa_nodes.size() == 2);
  CHECK(t.cores[0].l3 == 0);
  CHECK(t.cores[4].l3 == 1);
  CHECK(t.cores[15].l3 == 3);
}

TEST_CASE("an allowed list narrows usable PUs and drops cores without one") {
  const Topology t = load_synthetic_topology(nano_test::linux_two_socket(), "0-3,16-17,9");
  CHECK(format_cpu_list(t.allowed_pus) == "0-3,9,16-17");
  CHECK(format_cpu_list(t.present_pus) == "0-31");
  REQUIRE(t.cores.size() == 5);
  CHECK(t.cores[0].pus == std::vector<int>{0, 16});
  CHECK(t.cores[1].pus == std::vector<int>{1, 17});
  CHECK(t.cores[2].pus == std::vector<int>{2});
  CHECK(t.cores[4].pus == std::vector<int>{9});
  CHECK(t.cores[4].package == 1);
  CHECK(t.packages == 2);
}

TEST_CASE("hybrid CPU from an hwloc XML with cpukinds") {
  const Topology t = load_xml_topology(nano_test::hybrid_xml());
  CHECK(t.hybrid);
  REQUIRE(t.cores.size() == 12);
  for (int i = 0; i < 8; ++i) {
    CAPTURE(i);
    CHECK_FALSE(t.cores[i].efficiency);
    CHECK(t.cores[i].pus.size() == 2);
  }
  for (int i = 8; i < 12; ++i) {
    CAPTURE(i);
    CHECK(t.cores[i].efficiency);
    CHECK(t.cores[i].pus == std::vector<int>{16 + 2 * (i - 8)});
  }
  // Only efficiency cores allowed: nothing hybrid left to choose between.
  CHECK_FALSE(load_xml_topology(nano_test::hybrid_xml(), "16,18").hybrid);
}

TEST_CASE("this machine loads and respects its allowed set") {
  const Topology t = load_machine_topology();
  CHECK(t.source == "this machine");
  CHECK_FALSE(t.cores.empty());
  std::size_t pus = 0;
  for (const Core& c : t.cores) pus += c.pus.size();
  CHECK(pus == t.allowed_pus.size());
}

TEST_CASE("bad topology inputs name the value") {
  CHECK_THROWS_WITH_AS(load_synthetic_topology("pack:x"), "invalid hwloc synthetic topology \"pack:x\"", UsageError);
  CHECK_THROWS_WITH_AS(load_xml_topology("/nonexistent/m.xml"), "cannot read hwloc XML topology \"/nonexistent/m.xml\"",
                       UsageError);
  CHECK_THROWS_WITH_AS(load_synthetic_topology(nano_test::kTwoCores, "5"),
                       "allowed CPUs \"5\": CPU 5 does not exist on the synthetic machine "
                       "\"core:2 pu:1\"",
                       UsageError);
  CHECK_THROWS_WITH_AS(load_synthetic_topology(nano_test::kTwoCores, "1-0"), "allowed CPUs: malformed CPU list \"1-0\"",
                       UsageError);
}

TEST_CASE("describe_topology summarises the machine") {
  const std::string text = describe_topology(load_synthetic_topology(nano_test::kFourNuma, "0-31"));
  CHECK(text ==
        "machine:      synthetic: pack:2 numa:2 core:8 pu:2\n"
        "packages:     1\n"
        "NUMA nodes:   2 (0-1)\n"
        "L3 domains:   1\n"
        "cores:        16 usable physical cores\n"
        "SMT:          2 threads per core\n"
        "present CPUs: 0-63 (64)\n"
        "allowed CPUs: 0-31 (32)\n"
        "core kinds:   1 (not hybrid)\n"
        "  NUMA node 0: package 0, 8 cores, CPUs 0-15\n"
        "  NUMA node 1: package 0, 8 cores, CPUs 16-31\n");
  CHECK(describe_topology(load_xml_topology(nano_test::hybrid_xml()))
            .find("core kinds:   hybrid: 8 performance, 4 efficiency\n") != std::string::npos);
}

TEST_CASE("reading this machine leaves hwloc's plugin blacklist out of the environment") {
  // The I/O plugins are blocked only while hwloc initialises; ranks must not inherit that.
  REQUIRE(std::getenv("HWLOC_PLUGINS_BLACKLIST") == nullptr);
  const nano::Topology t = nano::load_machine_topology();
  CHECK(!t.cores.empty());
  CHECK(std::getenv("HWLOC_PLUGINS_BLACKLIST") == nullptr);
}
