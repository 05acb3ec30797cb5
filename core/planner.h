#pragma once
// The core planner: a pure function from a machine and the user's wishes to the CPUs of
// every rank. No I/O here; nano-run, nano-init and TorchNano all call it.
#include <string>
#include <vector>

#include "core/topology.h"

namespace nano {

/// What the user asked for. Zero means "not given".
struct PlanOptions {
  int num_processes = 0;      ///< N; 0 = derive from cores_per_process, else 1
  int cores_per_process = 0;  ///< K physical cores per rank; 0 = split evenly
  /// One CPU list (OS indexes) per rank, e.g. {{0, 1}, {2, 3}}; empty = plan automatically.
  /// Text forms ("0-1;2-3") are parsed by the front ends (parse_cpu_lists).
  std::vector<std::vector<int>> cpu_for_each_process;
  bool use_logical_cores = false;     ///< give ranks every allowed PU, not one per core
  bool use_efficiency_cores = false;  ///< also use efficiency cores of a hybrid CPU
  bool oversubscribe = false;         ///< allow more ranks than usable cores (ranks share)
};

/// PlanOptions::cpu_for_each_process from its text form ("0-3;4-7", parse_cpu_lists); throws
/// SettingError "{cpu_for_each_process}: <what is wrong>" naming the value.
std::vector<std::vector<int>> parse_cpu_for_each_process(const std::string& text);

/// The CPUs of one rank.
struct RankPlan {
  int rank = 0;
  std::vector<int> cpus;        ///< OS indexes of the PUs it is bound to, sorted
  std::vector<int> numa_nodes;  ///< OS indexes of the NUMA nodes those PUs belong to
  int threads = 1;              ///< physical cores it owns (its OMP_NUM_THREADS)
};

/// The whole decision: one entry per rank plus human-readable notes
/// (e.g. "rank 3 spans NUMA nodes 1 and 2").
struct Plan {
  std::vector<RankPlan> ranks;
  std::vector<std::string> notes;
};

/// Throws SettingError "{num_processes} must be at least 1, got N" when N < 1. PlanOptions uses
/// 0 for "not given", so a front end whose user gave an explicit 0 calls this first; make_plan
/// itself rejects negative counts with the same text.
void check_num_processes(int num_processes);

/// Splits `topology` among ranks. Guarantees: CPU sets are disjoint (unless oversubscribed),
/// SMT siblings of a core never go to two ranks, every usable core is used, remainders are
/// spread (43/43/42) and ranks stay inside one NUMA node / package when the counts allow.
/// Throws SettingError (core/setting.h) with the exact texts covered by
/// tests/core/planner_test.cc; notes name settings by the same placeholders.
Plan make_plan(const Topology& topology, const PlanOptions& options);

}  // namespace nano
