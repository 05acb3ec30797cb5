#include "core/recipe.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>

#include <nano/error.h>
#include "core/cpulist.h"
#include "core/setting.h"

extern char** environ;

namespace nano {
namespace {

// BigDL-Nano's setting, except metadata_thp: with `always`, ResNet-18 training (one thread,
// batch 64) ran 28-31 img/s against 46-49 with `auto` or unset on Debian 12's jemalloc 5.3
// (kernel THP mode "madvise"); the convolution kernels themselves ran slower, with the same page
// faults, so the metadata's huge pages change where tensors land, not how often they fault.
// LeNet was unchanged (within 3%). `auto` is what Intel's PyTorch extension uses.
const char* const kMallocConf =
    "oversize_threshold:1,background_thread:false,metadata_thp:auto,dirty_decay_ms:-1,"
    "muzzy_decay_ms:-1";

std::string base_name(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

// ld.so accepts both ':' and spaces between LD_PRELOAD entries.
std::vector<std::string> split_preload(const std::string& value) {
  std::vector<std::string> out;
  std::string item;
  for (char ch : value) {
    if (ch == ':' || ch == ' ' || ch == '\t') {
      if (!item.empty()) out.push_back(item);
      item.clear();
    } else {
      item += ch;
    }
  }
  if (!item.empty()) out.push_back(item);
  return out;
}

std::string join_preload(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ":") + item;
  return out;
}

bool is_allocator_library(const std::string& path) {
  const std::string name = base_name(path);
  // libtcmalloc covers tcmalloc_minimal, tcmalloc_debug and tcmalloc_and_profiler too.
  return starts_with(name, "libjemalloc") || starts_with(name, "libtcmalloc") || starts_with(name, "libmimalloc");
}

bool is_intel_openmp(const std::string& path) {
  const std::string name = base_name(path);
  return starts_with(name, "libiomp5") || starts_with(name, "libomp.so");
}

std::string get(const Environment& env, const std::string& name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

bool is_regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<std::string> library_dirs() {
  std::vector<std::string> dirs;
  if (const char* ld = std::getenv("LD_LIBRARY_PATH")) {
    std::string dir;
    for (const char* p = ld;; ++p) {
      if (*p == ':' || *p == '\0') {
        if (!dir.empty()) dirs.push_back(dir);
        dir.clear();
        if (*p == '\0') break;
      } else {
        dir += *p;
      }
    }
  }
  // The multiarch folder is where Debian installs libjemalloc.so.2 and libtcmalloc.so.4.
#if defined(__x86_64__)
  const std::string triplet = "x86_64-linux-gnu";
#elif defined(__aarch64__)
  const std::string triplet = "aarch64-linux-gnu";
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
  const std::string triplet = "powerpc64le-linux-gnu";
#elif defined(__s390x__)
  const std::string triplet = "s390x-linux-gnu";
#else
  const std::string triplet;
#endif
  if (!triplet.empty()) {
    dirs.push_back("/usr/local/lib/" + triplet);
    dirs.push_back("/usr/lib/" + triplet);
    dirs.push_back("/lib/" + triplet);
  }
  for (const char* dir : {"/usr/local/lib", "/usr/lib64", "/lib64", "/usr/lib", "/lib"}) dirs.push_back(dir);
  return dirs;
}

}  // namespace

Allocator parse_allocator(const std::string& text) {
  if (text == "jemalloc") return Allocator::kJemalloc;
  if (text == "tcmalloc") return Allocator::kTcmalloc;
  if (text == "system") return Allocator::kSystem;
  if (text == "auto") return Allocator::kAutomatic;
  throw SettingError(Setting::kAllocator, text,
                     "unknown allocator \"" + text + "\" (choose jemalloc, tcmalloc, system or auto)");
}

OpenMpRuntime parse_openmp_runtime(const std::string& text) {
  if (text == "gnu") return OpenMpRuntime::kGnu;
  if (text == "intel") return OpenMpRuntime::kIntel;
  if (text == "auto") return OpenMpRuntime::kAutomatic;
  throw SettingError(Setting::kOpenMp, text, "unknown OpenMP runtime \"" + text + "\" (choose gnu, intel or auto)");
}

std::string find_installed_library(const std::vector<std::string>& names) {
  const std::vector<std::string> dirs = library_dirs();
  for (const std::string& name : names)
    for (const std::string& dir : dirs)
      if (is_regular_file(dir + "/" + name)) return dir + "/" + name;
  return "";
}

Recipe make_recipe(int physical_cores, const std::vector<int>& cpus, const RecipeOptions& options,
                   const Environment& current, const LibraryFinder& find_library) {
  if (options.threads < 0)
    throw SettingError(Setting::kThreads, std::to_string(options.threads),
                       "{threads} must be at least 1, got " + std::to_string(options.threads));
  Recipe recipe;
  auto add = [&](const std::string& name, const std::string& value, const std::string& reason) {
    recipe.set.push_back({name, value, reason});
    if (name != "LD_PRELOAD") recipe.unset_names.push_back(name);
  };
  const std::vector<std::string> preload = split_preload(get(current, "LD_PRELOAD"));
  const std::string scope = cpus.empty() ? std::string("the machine") : "CPUs " + format_cpu_list(cpus);

  if (!options.disable_openmp) {
    const int threads = options.threads > 0 ? options.threads : std::max(physical_cores, 1);
    add("OMP_NUM_THREADS", std::to_string(threads),
        options.threads > 0
            ? "set by --threads"
            : "one OpenMP thread per physical core of " + scope + " (" + std::to_string(std::max(physical_cores, 1)) +
                  "); SMT siblings share a core's floating-point units");
    OpenMpRuntime runtime = options.openmp;
    if (runtime == OpenMpRuntime::kAutomatic)
      runtime =
          std::any_of(preload.begin(), preload.end(), is_intel_openmp) ? OpenMpRuntime::kIntel : OpenMpRuntime::kGnu;
    // No OpenMP binding on purpose. Measured on this project's 2-core Debian 12 machine with a
    // small OpenMP reduction (libgomp 12 and LLVM libomp as libiomp5): OMP_PROC_BIND=true,
    // OMP_PROC_BIND=close|spread + OMP_PLACES=cores, GOMP_CPU_AFFINITY=0-1 and
    // KMP_AFFINITY=granularity=fine,compact,1,0 all pin the primary thread to ONE CPU at the
    // first parallel region, and a std::thread created afterwards inherits that one-CPU mask
    // (sched_getaffinity: 1 CPU instead of 2). libtorch's inter-op pool, Gloo/MPI progress
    // threads and data loaders are such later threads, so they would all crowd one CPU.
    // Without a binding variable both CPUs stay usable by every thread. Locality comes from
    // nano-run binding each rank process to its CPU set, so OpenMP needs no CPU list.
    if (runtime == OpenMpRuntime::kGnu) {
      add("OMP_PROC_BIND", "false",
          "GNU libgomp (Debian's libtorch): binding would pin the main thread to one CPU and "
          "every thread it starts later (inter-op, Gloo/MPI, data loaders) with it; the "
          "process CPU mask already keeps threads on their own CPUs");
    } else {
      add("KMP_AFFINITY", "disabled",
          "Intel/LLVM OpenMP: KMP_AFFINITY=compact pins the main thread to one CPU and every "
          "thread it starts later with it; the process CPU mask already keeps threads local");
      add("KMP_BLOCKTIME", "1",
          "Intel/LLVM OpenMP: idle workers sleep after 1 ms instead of spinning 200 ms, "
          "leaving the cores to communication and data threads between parallel regions");
    }
  }

  // Allocator: keep the user's own preloads in order, drop allocators nano may have added
  // before (so switching allocator works), and append the chosen one at most once.
  std::string library;
  std::string allocator_name;
  if (options.allocator == Allocator::kJemalloc || options.allocator == Allocator::kAutomatic) {
    library = find_library({"libjemalloc.so.2", "libjemalloc.so"});
    allocator_name = "jemalloc";
    if (library.empty() && options.allocator == Allocator::kJemalloc)
      throw SettingError(Setting::kAllocator, "jemalloc",
                         "{allocator} jemalloc: libjemalloc.so.2 is not installed (Debian package libjemalloc2)");
  } else if (options.allocator == Allocator::kTcmalloc) {
    library = find_library({"libtcmalloc.so.4", "libtcmalloc.so"});
    allocator_name = "tcmalloc";
    if (library.empty())
      throw SettingError(Setting::kAllocator, "tcmalloc",
                         "{allocator} tcmalloc: libtcmalloc.so.4 is not installed (Debian package "
                         "libgoogle-perftools4)");
  }
  // An allocator the user preloads themselves wins over the automatic choice: two allocators
  // in one process would fight over every malloc. (The very library the recipe would add is
  // taken as the recipe's own, from an earlier nano-init, so the recipe stays idempotent.)
  if (options.allocator == Allocator::kAutomatic) {
    auto own = std::find_if(preload.begin(), preload.end(),
                            [&](const std::string& item) { return is_allocator_library(item) && item != library; });
    if (own != preload.end()) {
      recipe.warnings.push_back("your LD_PRELOAD already loads an allocator (" + *own + "); " +
                                (library.empty() ? std::string("none") : allocator_name) +
                                " was not added (--allocator chooses one instead)");
      return recipe;
    }
  }
  std::vector<std::string> kept;
  for (const std::string& item : preload) {
    if (is_allocator_library(item) && base_name(item) != base_name(library)) continue;
    if (!library.empty() && base_name(item) == base_name(library)) {
      if (std::find(kept.begin(), kept.end(), library) == kept.end()) kept.push_back(library);
      continue;
    }
    if (std::find(kept.begin(), kept.end(), item) == kept.end()) kept.push_back(item);
  }
  if (!library.empty() && std::find(kept.begin(), kept.end(), library) == kept.end()) kept.push_back(library);
  if (!library.empty() || !preload.empty()) {
    const std::string reason = library.empty() ? "system allocator: other allocators taken out, your own preloads kept"
                                               : allocator_name + " (" + library +
                                                     ") replaces glibc malloc: fewer page faults and less lock "
                                                     "contention for many-threaded tensor allocation; your own "
                                                     "preloads are kept";
    add("LD_PRELOAD", join_preload(kept), reason);
  }
  if (allocator_name == "jemalloc" && !library.empty())
    add("MALLOC_CONF", kMallocConf,
        "jemalloc: keep freed memory (no decay) and big allocations on their own extents, so "
        "the same tensor sizes each step do not fault pages in again");
  return recipe;
}

Environment apply_recipe(const Recipe& recipe, Environment current) {
  for (const EnvSetting& s : recipe.set) current[s.name] = s.value;
  return current;
}

Environment unapply_recipe(const Recipe& recipe, Environment current) {
  for (const std::string& name : recipe.unset_names) current.erase(name);
  for (const EnvSetting& s : recipe.set) {
    if (s.name != "LD_PRELOAD") continue;
    // Take out only the allocator the recipe added; the user's own preloads stay.
    std::vector<std::string> kept;
    for (const std::string& item : split_preload(get(current, "LD_PRELOAD")))
      if (!is_allocator_library(item)) kept.push_back(item);
    if (kept.empty())
      current.erase("LD_PRELOAD");
    else
      current["LD_PRELOAD"] = join_preload(kept);
  }
  return current;
}

Environment current_environment() {
  Environment env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const auto eq = text.find('=');
    if (eq == std::string::npos) continue;
    env.emplace(text.substr(0, eq), text.substr(eq + 1));
  }
  return env;
}

}  // namespace nano
