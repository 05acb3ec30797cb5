#pragma once
// Which layouts `nano-run --tune` tries on one host: rank counts whose cores divide evenly along
// the machine's package, NUMA and L3 boundaries (or the user's list), each with every allocator
// asked for. Pure: a topology and the wishes in, the layouts out; the planner gives the threads.
#include <string>
#include <vector>

#include "core/planner.h"
#include "core/recipe.h"
#include "core/topology.h"

namespace nano {

/// One layout of a job on one host: how many ranks, how many threads each, which allocator.
struct Layout {
  int ranks = 1;
  int threads = 1;  ///< OMP threads of rank 0 (the planner spreads a remainder: 43/43/42)
  Allocator allocator = Allocator::kAutomatic;
};
bool operator==(const Layout& a, const Layout& b);

/// "4 ranks x 7 threads, jemalloc" ("1 rank x 2 threads, automatic allocator").
std::string layout_text(const Layout& layout);
/// The allocator's name as --allocator takes it: "jemalloc", "tcmalloc", "system", "auto".
std::string allocator_name(Allocator allocator);

/// Rank counts k that split the cores `plan` uses (efficiency cores only with
/// plan.use_efficiency_cores) into equal ranks of consecutive cores, each inside one package,
/// NUMA node and L3 domain or covering whole ones. Of those: 1, the powers of two, the counts
/// that give each rank a power of two of cores, the three domain counts and one rank per core,
/// ascending. A cgroup-limited machine with uneven domains yields fewer; 1 always.
std::vector<int> even_rank_counts(const Topology& topology, const PlanOptions& plan);

/// What the user asked of the candidates.
struct CandidateRequest {
  std::vector<int> rank_counts;       ///< --tune-candidates; empty = even_rank_counts
  std::vector<Allocator> allocators;  ///< --tune-allocators; empty = the launch's own
  int max_ranks = 0;                  ///< --max-ranks; 0 = no cap
};

/// Every layout to try, fewest ranks first and, for one count, in the allocators' order; the
/// threads are the planner's for that count. Counts above max_ranks are left out. Throws
/// SettingError when nothing is left, or naming a count the planner refuses for this machine
/// ("{tune_candidates} 64 ...: more ranks than the 2 usable physical cores").
std::vector<Layout> candidate_layouts(const Topology& topology, const PlanOptions& plan, const RecipeOptions& recipe,
                                      const CandidateRequest& request);

/// "1,2,4" -> {1, 2, 4}: distinct counts >= 1, in the order given. Throws SettingError
/// (Setting::kTuneCandidates) naming a bad entry.
std::vector<int> parse_rank_counts(const std::string& text);
/// "jemalloc,tcmalloc,default" (default = the C library's malloc, as "system"). Throws
/// SettingError (Setting::kTuneAllocators) naming a bad entry.
std::vector<Allocator> parse_allocator_list(const std::string& text);

}  // namespace nano
