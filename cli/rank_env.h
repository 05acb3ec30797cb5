#pragma once
// The environment of one rank: the rank contract (a superset of torchrun's) plus the
// environment recipe for the rank's own CPUs. Pure: the current environment and the library
// finder are passed in, so the same function serves nano-run, the mpi shim and the tests.
#include <map>
#include <string>
#include <vector>

#include "env-init/planner.h"
#include "env-init/recipe.h"

namespace nano {

/// Who a rank is in the job.
struct RankIdentity {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int group_rank = 0;  ///< index of its host (torchrun's GROUP_RANK / node rank)
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
};

/// A rank's environment and the recipe variables the user's exported values overrode.
struct RankEnvironment {
  Environment env;
  std::vector<std::string> user_kept;  ///< recipe names whose exported value was kept
  std::vector<std::string> warnings;   ///< the recipe's warnings (e.g. the user's allocator kept)
};

/// `current` + recipe for `plan`'s CPUs + RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
/// GROUP_RANK, MASTER_ADDR, MASTER_PORT, NANO_CPUS, USE_LIBUV=0 (unless exported: PyTorch 2.x's
/// store on a libtorch without libuv) + `extra_env` (applied last, always wins).
/// A recipe variable the user exported with a different value keeps the user's value
/// (LD_PRELOAD is always appended to; OMP_NUM_THREADS follows an explicit `--threads`).
RankEnvironment make_rank_environment(const RankIdentity& identity, const RankPlan& plan,
                                      const RecipeOptions& recipe_options, const Environment& current,
                                      const LibraryFinder& finder, const std::map<std::string, std::string>& extra_env);

/// The one warning printed for `user_kept` names ("" when empty), e.g.
/// "nano-run: keeping your exported OMP_NUM_THREADS=8 instead of the planned value for every rank".
std::string user_kept_warning(const std::vector<std::string>& user_kept, const Environment& current);

/// "NAME=VALUE" strings for execve.
std::vector<std::string> environment_strings(const Environment& env);

}  // namespace nano
