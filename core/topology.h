#pragma once
// The hardware model: what the machine (or a described machine) offers, as a plain value.
// Filled from hwloc; the planner and recipe only ever see this value, so they are tested
// on synthetic machines without that hardware.
#include <string>
#include <vector>

namespace nano {

/// One physical core with its usable hardware threads.
struct Core {
  int os_index = 0;         ///< hwloc's OS index of the core (may repeat across packages)
  int logical_index = 0;    ///< position of the core in machine order, 0..cores-1
  int package = 0;          ///< logical index of its package (socket)
  int numa_node = 0;        ///< OS index of its NUMA node
  int l3 = 0;               ///< logical index of its L3 domain (package index when unknown)
  bool efficiency = false;  ///< true for an efficiency core of a hybrid CPU
  std::vector<int> pus;     ///< OS indexes of its allowed PUs, sorted (first = primary)
};

/// A machine as nano sees it. Only allowed PUs (cgroup cpuset, taskset, docker --cpuset-cpus)
/// appear in `cores`; a core with no allowed PU is left out entirely.
struct Topology {
  std::string source;            ///< "this machine", "synthetic: <desc>", "xml: <path>"
  int packages = 0;              ///< number of packages with at least one allowed PU
  std::vector<int> numa_nodes;   ///< OS indexes of NUMA nodes with at least one allowed PU
  int l3_domains = 0;            ///< number of L3 domains with at least one allowed PU
  std::vector<Core> cores;       ///< usable physical cores, in machine (logical) order
  std::vector<int> present_pus;  ///< every PU the machine has, allowed or not, sorted
  std::vector<int> allowed_pus;  ///< PUs this process may use, sorted
  bool hybrid = false;           ///< more than one core kind was reported

  /// Largest number of allowed PUs on one core (1 = no SMT in use).
  int smt() const;
};

/// Reads this machine with hwloc, restricted to the CPUs this process may use.
/// Throws Error when hwloc fails.
Topology load_machine_topology();

/// Loads an hwloc XML export (`lstopo file.xml`). `allowed` (a CPU list, "" = all) narrows the
/// usable PUs as a cpuset would. Throws UsageError naming `path` when missing or malformed.
Topology load_xml_topology(const std::string& path, const std::string& allowed = "");

/// Builds a machine from an hwloc synthetic description such as
/// "pack:2 numa:2 core:8 pu:2(indexes=...)". `allowed` narrows the usable PUs.
/// Throws UsageError naming `description` when hwloc rejects it.
Topology load_synthetic_topology(const std::string& description, const std::string& allowed = "");

/// A human-readable multi-line summary (`nano-init --show-topology`).
std::string describe_topology(const Topology& topology);

}  // namespace nano
