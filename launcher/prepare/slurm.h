#pragma once
// Slurm allocations: inside `salloc`/`sbatch`, nano-run with no --hosts takes the allocation's
// nodes and task counts from the variables Slurm sets, and plans each node's cores as usual.
#include <optional>
#include <string>
#include <vector>

#include "core/recipe.h"
#include "launcher/prepare/hosts.h"

namespace nano {

/// Pure: Slurm's compressed host list, "node[01-03,7],login,rack[1-2]-n[1-2]" ->
/// node01 node02 node03 node7 login rack1-n1 rack1-n2 rack2-n1 rack2-n2 (zero padding kept).
/// Throws UsageError naming the list for unbalanced brackets or a bad range.
std::vector<std::string> expand_slurm_nodelist(const std::string& list);

/// Pure: Slurm's per-node task counts, "2(x3),1" -> 2 2 2 1. Throws UsageError naming the text.
std::vector<int> expand_slurm_counts(const std::string& counts);

/// Pure: the hosts of the Slurm allocation this process runs in, from SLURM_JOB_NODELIST (or
/// SLURM_NODELIST) and SLURM_TASKS_PER_NODE (a node's slots = its tasks; 1 each when Slurm
/// gives no counts); nullopt outside an allocation. Throws UsageError when the two lists do
/// not match.
std::optional<std::vector<HostSlots>> slurm_allocation_hosts(const Environment& env);

/// One node's nano-run in a Slurm step of one task per node (`srun -N 2 nano-run ...`).
struct SlurmNodePart {
  int node = 0;                         ///< SLURM_NODEID
  int nodes = 1;                        ///< SLURM_STEP_NUM_NODES
  std::string master;                   ///< the step's first node: rank 0's host
  std::vector<std::string> step_nodes;  ///< every node of the step (SLURM_STEP_NODELIST)
  int port = 0;                         ///< a rendezvous port every node derives alike from the job and step
  std::string run_id;                   ///< "slurm-<SLURM_JOB_ID>.<SLURM_STEP_ID>": the step's name on every node
};

/// Pure: the node part this process is, when it is one of several tasks of a Slurm step, one
/// per node; nullopt otherwise. Throws UsageError when the step has several tasks on a node
/// (each would start its own ranks).
std::optional<SlurmNodePart> slurm_node_part(const Environment& env);

}  // namespace nano
