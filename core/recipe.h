#pragma once
// The environment recipe (the bigdl-nano-init equivalent): which variables make one
// process (or one rank) run well on the CPUs it owns. Pure: the current environment and
// the installed libraries are passed in.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nano/environment.h>

namespace nano {

enum class Allocator { kAutomatic, kJemalloc, kTcmalloc, kSystem };
enum class OpenMpRuntime { kAutomatic, kGnu, kIntel };

/// Parses "jemalloc|tcmalloc|system|auto"; throws UsageError naming the value.
Allocator parse_allocator(const std::string& text);
/// Parses "gnu|intel|auto"; throws UsageError naming the value.
OpenMpRuntime parse_openmp_runtime(const std::string& text);

struct RecipeOptions {
  Allocator allocator = Allocator::kAutomatic;  ///< automatic = jemalloc when installed
  OpenMpRuntime openmp = OpenMpRuntime::kAutomatic;
  bool disable_openmp = false;  ///< leave every OpenMP variable out
  int threads = 0;              ///< OMP_NUM_THREADS override; 0 = physical cores in scope
};

/// One variable to set, with the one-line reason `--explain` prints.
struct EnvSetting {
  std::string name;
  std::string value;
  std::string reason;
};

/// Variables to set, in a stable order, and the names the matching unset recipe removes.
struct Recipe {
  std::vector<EnvSetting> set;
  std::vector<std::string> unset_names;
  /// Lines for the user about choices the recipe deferred to them (e.g. their own allocator
  /// kept in LD_PRELOAD); printed once as warnings.
  std::vector<std::string> warnings;
};

/// Finds an installed shared library by its file name(s) ("libjemalloc.so.2"); returns its
/// full path or "" when absent. Real implementation: `find_installed_library`.
using LibraryFinder = std::function<std::string(const std::vector<std::string>& names)>;

/// Searches the dynamic loader's real places (multiarch folders such as
/// /usr/lib/x86_64-linux-gnu, /usr/lib, /usr/local/lib, LD_LIBRARY_PATH) for the first of `names`.
std::string find_installed_library(const std::vector<std::string>& names);

/// Computes the recipe for a scope of `physical_cores` cores whose PUs are `cpus`, given the
/// current environment. Idempotent: applying the result and computing again gives the same
/// values; LD_PRELOAD is appended to, never clobbered, and never lists a library twice.
/// Throws UsageError when an explicitly requested allocator is not installed.
Recipe make_recipe(int physical_cores, const std::vector<int>& cpus, const RecipeOptions& options,
                   const Environment& current, const LibraryFinder& find_library);

/// `current` with the recipe applied (what a rank's environment becomes).
Environment apply_recipe(const Recipe& recipe, Environment current);

/// `current` with the recipe undone: its variables removed, its libraries taken out of LD_PRELOAD.
Environment unapply_recipe(const Recipe& recipe, Environment current);

}  // namespace nano
