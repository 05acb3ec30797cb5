#pragma once
// Synthetic machines shared by the env-init tests.
#include <string>

namespace nano_test {

/// This development machine: 1 package x 2 cores, no SMT.
inline const std::string kTwoCores = "core:2 pu:1";

/// 2 packages x 8 cores x 2 PUs, numbered like Linux: the SMT sibling of CPU i is i+16.
inline std::string linux_two_socket() {
  std::string indexes;
  for (int core = 0; core < 16; ++core)
    indexes += (core ? "," : "") + std::to_string(core) + "," + std::to_string(core + 16);
  return "pack:2 core:8 pu:2(indexes=" + indexes + ")";
}

/// 2 packages x 2 NUMA nodes x 8 cores x 2 PUs (sibling PUs adjacent: 0,1 share a core).
inline const std::string kFourNuma = "pack:2 numa:2 core:8 pu:2";

/// An AMD-like machine: 2 packages (one NUMA node each) x 2 L3 domains x 4 cores x 2 PUs.
inline const std::string kL3Split = "pack:2 [numa] l3:2 core:4 pu:2";

/// Hybrid (Alder Lake-like): 8 P-cores with SMT (PUs 0-15), 4 E-cores (16,18,20,22).
inline std::string hybrid_xml() { return std::string(NANO_TEST_DATA_DIR) + "/hybrid.xml"; }

}  // namespace nano_test
