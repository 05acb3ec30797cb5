#pragma once
// The environment of one rank: the rank contract (a superset of torchrun's) plus the
// environment recipe for the rank's own CPUs. Pure: the current environment and the library
// finder are passed in, so the same function serves nano-run, the mpi shim and the tests.
#include <map>
#include <string>
#include <vector>

#include "core/planner.h"
#include "core/recipe.h"

namespace nano {

/// Who a rank is in the job.
struct RankIdentity {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  int group_rank = 0;        ///< index of its host (torchrun's GROUP_RANK / node rank)
  int group_world_size = 1;  ///< number of hosts (torchrun's GROUP_WORLD_SIZE / nnodes)
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
};

/// A rank's environment and the recipe variables the user's exported values overrode.
struct RankEnvironment {
  Environment env;
  std::vector<std::string> user_kept;  ///< recipe names whose exported value was kept
  std::vector<std::string> warnings;   ///< the recipe's warnings (e.g. the user's allocator kept)
};

/// `current` + recipe for `plan`'s CPUs + torchrun's worker variables (RANK, LOCAL_RANK,
/// WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, ROLE_RANK = RANK,
/// ROLE_WORLD_SIZE = WORLD_SIZE, ROLE_NAME = "default" as torchrun's one role, MASTER_ADDR,
/// MASTER_PORT) + NANO_CPUS, USE_LIBUV=0 (unless exported: PyTorch 2.x's store on a libtorch
/// without libuv) + `extra_env` (applied over those). Then, whoever set them: the agent's
/// variables go (drop_agent_variables, its warning in `warnings`), and `python_folder` (nano's
/// Python folder, "" = none) is put first on PYTHONPATH (python_path_with).
/// A recipe variable the user exported with a different value keeps the user's value
/// (LD_PRELOAD is always appended to; OMP_NUM_THREADS follows an explicit `--threads`).
/// The attempt's variables (launcher/prepare/torchrun_env.h) are the caller's to add: they change on restart.
RankEnvironment make_rank_environment(const RankIdentity& identity, const RankPlan& plan,
                                      const RecipeOptions& recipe_options, const Environment& current,
                                      const LibraryFinder& finder, const std::map<std::string, std::string>& extra_env,
                                      const std::string& python_folder);

/// Pure: `pythonpath` with `folder` first: "FOLDER:PYTHONPATH" ("FOLDER" when `pythonpath` is
/// empty); unchanged when `folder` is "" or already one of its entries (no duplicate).
std::string python_path_with(const std::string& pythonpath, const std::string& folder);

/// Pure: where nano's Python module lives for the executable at `executable`: its folder's
/// parent + "/lib/nano/python" (build/bin/nano-run -> build/lib/nano/python, PREFIX/bin/nano-run
/// -> PREFIX/lib/nano/python); "" when `executable` is not an absolute path.
std::string python_folder_for(const std::string& executable);

/// The one warning printed for `user_kept` names ("" when empty), e.g.
/// "nano-run: keeping your exported OMP_NUM_THREADS=8 instead of the planned value for every rank".
std::string user_kept_warning(const std::vector<std::string>& user_kept, const Environment& current);

/// The listen guard of a job over several hosts (launcher/listen_guard/listen_guard.c): the library preloaded
/// into its processes and the sources their listeners admit.
struct ListenGuard {
  std::string library;               ///< "" = no guard
  std::vector<std::string> sources;  ///< IPv4 addresses (admitted_sources, launcher/prepare/hosts.h)
};

/// Pure: `guard` put into `env` (nothing when it has no library): the library first on
/// LD_PRELOAD (once), and NANO_LISTEN_GUARD = its sources, comma-separated.
void add_listen_guard(Environment& env, const ListenGuard& guard);

/// Pure: NANO_LISTEN_GUARD's value for `guard`'s sources.
std::string listen_guard_value(const ListenGuard& guard);

/// Pure: throws UsageError "bad NANO_LISTEN_GUARD='VALUE': expected IPv4 addresses separated by
/// commas, or off" when `guard` has a library and its value is one the guard cannot read (it
/// would refuse every listener: nano_read_guard), so nothing starts with such a guard. nano-run
/// checks the guard it passes, and each rank shim the one it was handed.
void check_listen_guard(const ListenGuard& guard);

/// Pure: where the listen guard lives for the executable at `executable` (beside nano's Python
/// folder: build/bin/nano-run -> build/lib/nano/libnano_listen_guard.so); "" when `executable`
/// is not an absolute path.
std::string listen_guard_library_for(const std::string& executable);

/// "NAME=VALUE" strings for execve.
std::vector<std::string> environment_strings(const Environment& env);

}  // namespace nano
