#include "core/recipe.h"
#include "core/setting.h"

#include <doctest/doctest.h>

#include <nano/error.h>

using namespace nano;

namespace {

const std::string kJemalloc = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
const std::string kTcmalloc = "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4";

// A fake machine with both allocators installed at Debian's multiarch paths.
std::string fake_finder(const std::vector<std::string>& names) {
  if (names.front() == "libjemalloc.so.2") return kJemalloc;
  if (names.front() == "libtcmalloc.so.4") return kTcmalloc;
  return "";
}
std::string nothing_installed(const std::vector<std::string>&) { return ""; }

std::string value_of(const Recipe& r, const std::string& name) {
  for (const EnvSetting& s : r.set)
    if (s.name == name) return s.value;
  return "<unset>";
}

std::vector<std::string> names(const Recipe& r) {
  std::vector<std::string> out;
  for (const EnvSetting& s : r.set) out.push_back(s.name);
  return out;
}

}  // namespace

TEST_CASE("default recipe: threads per physical core, no binding, jemalloc") {
  const Recipe r = make_recipe(4, {0, 1, 2, 3}, RecipeOptions{}, {}, fake_finder);
  CHECK(names(r) == std::vector<std::string>{"OMP_NUM_THREADS", "OMP_PROC_BIND", "LD_PRELOAD", "MALLOC_CONF"});
  CHECK(value_of(r, "OMP_NUM_THREADS") == "4");
  CHECK(value_of(r, "OMP_PROC_BIND") == "false");
  CHECK(value_of(r, "LD_PRELOAD") == kJemalloc);
  CHECK(value_of(r, "MALLOC_CONF") ==
        "oversize_threshold:1,background_thread:false,metadata_thp:auto,dirty_decay_ms:-1,"
        "muzzy_decay_ms:-1");
  CHECK(r.unset_names == std::vector<std::string>{"OMP_NUM_THREADS", "OMP_PROC_BIND", "MALLOC_CONF"});
  for (const EnvSetting& s : r.set) CHECK_FALSE(s.reason.empty());
  CHECK(r.set[1].reason.find("one CPU") != std::string::npos);
}

TEST_CASE("the real finder locates Debian's versioned jemalloc in the multiarch folder") {
  const std::string path = find_installed_library({"libjemalloc.so.2", "libjemalloc.so"});
  CHECK(path.find("libjemalloc.so.2") != std::string::npos);
  CHECK(find_installed_library({"libtcmalloc.so.4"}).find("libtcmalloc.so.4") != std::string::npos);
  CHECK(find_installed_library({"libnothing-such.so.9"}) == "");
  const Recipe r = make_recipe(2, {}, RecipeOptions{}, {}, find_installed_library);
  CHECK(value_of(r, "LD_PRELOAD") == path);
}

TEST_CASE("options: threads, intel OpenMP, disable OpenMP, allocators") {
  RecipeOptions o;
  o.threads = 3;
  CHECK(value_of(make_recipe(8, {}, o, {}, fake_finder), "OMP_NUM_THREADS") == "3");
  o = RecipeOptions{};
  o.openmp = OpenMpRuntime::kIntel;
  Recipe intel = make_recipe(2, {}, o, {}, fake_finder);
  CHECK(value_of(intel, "KMP_AFFINITY") == "disabled");
  CHECK(value_of(intel, "KMP_BLOCKTIME") == "1");
  CHECK(value_of(intel, "OMP_PROC_BIND") == "<unset>");
  // automatic: intel when libiomp5 is preloaded
  const Recipe guessed = make_recipe(2, {}, RecipeOptions{}, {{"LD_PRELOAD", "/opt/intel/libiomp5.so"}}, fake_finder);
  CHECK(value_of(guessed, "KMP_BLOCKTIME") == "1");
  CHECK(value_of(guessed, "LD_PRELOAD") == "/opt/intel/libiomp5.so:" + kJemalloc);
  o = RecipeOptions{};
  o.disable_openmp = true;
  CHECK(names(make_recipe(2, {}, o, {}, fake_finder)) == std::vector<std::string>{"LD_PRELOAD", "MALLOC_CONF"});
  o = RecipeOptions{};
  o.allocator = Allocator::kTcmalloc;
  const Recipe tc = make_recipe(2, {}, o, {}, fake_finder);
  CHECK(value_of(tc, "LD_PRELOAD") == kTcmalloc);
  CHECK(value_of(tc, "MALLOC_CONF") == "<unset>");
  o.allocator = Allocator::kSystem;
  CHECK(names(make_recipe(2, {}, o, {}, fake_finder)) == std::vector<std::string>{"OMP_NUM_THREADS", "OMP_PROC_BIND"});
  // automatic without jemalloc installed: the system allocator, no error
  CHECK(names(make_recipe(2, {}, RecipeOptions{}, {}, nothing_installed)) ==
        std::vector<std::string>{"OMP_NUM_THREADS", "OMP_PROC_BIND"});
}

TEST_CASE("LD_PRELOAD is appended to, never clobbered, never duplicated") {
  const Environment env = {{"LD_PRELOAD", "/opt/a.so /opt/b.so:/opt/a.so"}};
  const Recipe r = make_recipe(2, {}, RecipeOptions{}, env, fake_finder);
  CHECK(value_of(r, "LD_PRELOAD") == "/opt/a.so:/opt/b.so:" + kJemalloc);
  // The recipe's own jemalloc (an earlier nano-init's): kept once
  const Recipe again = make_recipe(2, {}, RecipeOptions{}, {{"LD_PRELOAD", kJemalloc + ":/opt/a.so"}}, fake_finder);
  CHECK(value_of(again, "LD_PRELOAD") == kJemalloc + ":/opt/a.so");
  CHECK(again.warnings.empty());
  // an explicit --allocator switches: the old one goes out
  RecipeOptions tc;
  tc.allocator = Allocator::kTcmalloc;
  const Recipe switched = make_recipe(2, {}, tc, {{"LD_PRELOAD", "/opt/a.so:" + kJemalloc}}, fake_finder);
  CHECK(value_of(switched, "LD_PRELOAD") == "/opt/a.so:" + kTcmalloc);
  RecipeOptions sys;
  sys.allocator = Allocator::kSystem;
  CHECK(value_of(make_recipe(2, {}, sys, {{"LD_PRELOAD", "/opt/a.so:" + kJemalloc}}, fake_finder), "LD_PRELOAD") ==
        "/opt/a.so");
}

TEST_CASE("the user's own allocator in LD_PRELOAD wins over the automatic choice, with one warning") {
  struct Row {
    std::string preload;
  } rows[] = {
      {kTcmalloc},                                                            // Debian's tcmalloc, set by the user
      {"/opt/jemalloc/lib/libjemalloc.so.2"},                                 // jemalloc in a custom path
      {"/opt/a.so:/usr/lib/x86_64-linux-gnu/libtcmalloc_and_profiler.so.4"},  // tcmalloc with profiler
      {"/usr/lib/libmimalloc.so.2"},
  };
  for (const Row& row : rows) {
    CAPTURE(row.preload);
    const Recipe r = make_recipe(2, {}, RecipeOptions{}, {{"LD_PRELOAD", row.preload}}, fake_finder);
    CHECK(value_of(r, "LD_PRELOAD") == "<unset>");  // left exactly as the user set it: one allocator
    CHECK(value_of(r, "MALLOC_CONF") == "<unset>");
    REQUIRE(r.warnings.size() == 1);
    CHECK(r.warnings[0].find("your LD_PRELOAD already loads an allocator (") == 0);
    CHECK(r.warnings[0].find("); jemalloc was not added (--allocator chooses one instead)") != std::string::npos);
    CHECK(apply_recipe(r, {{"LD_PRELOAD", row.preload}}).at("LD_PRELOAD") == row.preload);
  }
}

TEST_CASE("applying the recipe twice gives the same environment; unapply restores") {
  const Environment start = {{"LD_PRELOAD", "/opt/a.so"}, {"HOME", "/root"}};
  for (Allocator a : {Allocator::kAutomatic, Allocator::kTcmalloc, Allocator::kSystem}) {
    for (OpenMpRuntime omp : {OpenMpRuntime::kGnu, OpenMpRuntime::kIntel}) {
      RecipeOptions o;
      o.allocator = a;
      o.openmp = omp;
      const Recipe r1 = make_recipe(4, {}, o, start, fake_finder);
      const Environment once = apply_recipe(r1, start);
      const Recipe r2 = make_recipe(4, {}, o, once, fake_finder);
      const Environment twice = apply_recipe(r2, once);
      CHECK(once == twice);
      CHECK(unapply_recipe(r2, twice) == start);
    }
  }
  const Recipe bare = make_recipe(2, {}, RecipeOptions{}, {}, fake_finder);
  CHECK(unapply_recipe(bare, apply_recipe(bare, {{"X", "1"}})) == Environment{{"X", "1"}});
}

TEST_CASE("recipe errors name the setting (by its key until a front end words it) and the value") {
  RecipeOptions o;
  o.allocator = Allocator::kJemalloc;
  CHECK_THROWS_WITH_AS(make_recipe(2, {}, o, {}, nothing_installed),
                       "allocator jemalloc: libjemalloc.so.2 is not installed (Debian package "
                       "libjemalloc2)",
                       UsageError);
  o.allocator = Allocator::kTcmalloc;
  CHECK_THROWS_WITH_AS(make_recipe(2, {}, o, {}, nothing_installed),
                       "allocator tcmalloc: libtcmalloc.so.4 is not installed (Debian package "
                       "libgoogle-perftools4)",
                       UsageError);
  o = RecipeOptions{};
  o.threads = -1;
  CHECK_THROWS_WITH_AS(make_recipe(2, {}, o, {}, fake_finder), "threads must be at least 1, got -1", SettingError);
  try {
    make_recipe(2, {}, o, {}, fake_finder);
  } catch (const SettingError& e) {
    CHECK(e.worded(command_line_flag) == "--threads must be at least 1, got -1");
    CHECK(e.setting() == Setting::kThreads);
    CHECK(e.value() == "-1");
  }
  CHECK_THROWS_WITH_AS(parse_allocator("hoard"),
                       "unknown allocator \"hoard\" (choose jemalloc, tcmalloc, system or auto)", UsageError);
  CHECK_THROWS_WITH_AS(parse_openmp_runtime("msvc"), "unknown OpenMP runtime \"msvc\" (choose gnu, intel or auto)",
                       UsageError);
  CHECK(parse_allocator("tcmalloc") == Allocator::kTcmalloc);
  CHECK(parse_openmp_runtime("auto") == OpenMpRuntime::kAutomatic);
}

TEST_CASE("current_environment reads the process environment") {
  ::setenv("NANO_RECIPE_TEST", "a=b", 1);
  CHECK(current_environment().at("NANO_RECIPE_TEST") == "a=b");
}
