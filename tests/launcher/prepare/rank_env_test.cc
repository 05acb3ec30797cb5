#include "launcher/prepare/rank_env.h"

#include <doctest/doctest.h>

using namespace nano;

namespace {
std::string fake_finder(const std::vector<std::string>& names) {
  for (const auto& n : names)
    if (n.find("jemalloc") != std::string::npos) return "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
  return "";
}

RankIdentity identity(int rank) {
  RankIdentity id;
  id.rank = rank;
  id.local_rank = rank % 2;
  id.world_size = 4;
  id.local_world_size = 2;
  id.group_rank = rank / 2;
  id.group_world_size = 2;
  id.master_addr = "node0";
  id.master_port = 29511;
  return id;
}

RankPlan plan_of(std::vector<int> cpus, int threads) {
  RankPlan p;
  p.cpus = std::move(cpus);
  p.threads = threads;
  return p;
}
}  // namespace

TEST_CASE("the rank contract: torchrun's variables plus NANO_CPUS and the recipe") {
  Environment current = {{"PATH", "/usr/bin"}, {"HOME", "/root"}};
  auto r = make_rank_environment(identity(3), plan_of({4, 5, 6, 7}, 4), {}, current, fake_finder, {}, "");
  const Environment& e = r.env;
  CHECK(e.at("RANK") == "3");
  CHECK(e.at("LOCAL_RANK") == "1");
  CHECK(e.at("WORLD_SIZE") == "4");
  CHECK(e.at("LOCAL_WORLD_SIZE") == "2");
  CHECK(e.at("GROUP_RANK") == "1");
  CHECK(e.at("GROUP_WORLD_SIZE") == "2");
  CHECK(e.at("ROLE_RANK") == "3");
  CHECK(e.at("ROLE_WORLD_SIZE") == "4");
  CHECK(e.at("ROLE_NAME") == "default");
  CHECK(e.at("MASTER_ADDR") == "node0");
  CHECK(e.at("MASTER_PORT") == "29511");
  CHECK(e.at("NANO_CPUS") == "4-7");
  CHECK(e.at("OMP_NUM_THREADS") == "4");
  CHECK(e.at("LD_PRELOAD") == "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
  CHECK(e.count("MALLOC_CONF") == 1);
  CHECK(e.at("PATH") == "/usr/bin");
  CHECK(r.user_kept.empty());
}

TEST_CASE("a variable the user exported wins, with one warning") {
  Environment current = {{"OMP_NUM_THREADS", "8"}, {"LD_PRELOAD", "/opt/mine.so"}};
  auto r = make_rank_environment(identity(0), plan_of({0, 1}, 2), {}, current, fake_finder, {}, "");
  CHECK(r.env.at("OMP_NUM_THREADS") == "8");
  CHECK(r.user_kept == std::vector<std::string>{"OMP_NUM_THREADS"});
  // LD_PRELOAD is appended to, never replaced.
  CHECK(r.env.at("LD_PRELOAD") == "/opt/mine.so:/usr/lib/x86_64-linux-gnu/libjemalloc.so.2");
  CHECK(user_kept_warning(r.user_kept, current) ==
        "nano-run: keeping your exported OMP_NUM_THREADS=8 instead of the planned value for every "
        "rank (unset to use the plan)");
  CHECK(user_kept_warning({}, current).empty());
}

TEST_CASE("an explicit --threads beats an exported OMP_NUM_THREADS") {
  Environment current = {{"OMP_NUM_THREADS", "8"}};
  RecipeOptions ro;
  ro.threads = 3;
  auto r = make_rank_environment(identity(0), plan_of({0, 1}, 2), ro, current, fake_finder, {}, "");
  CHECK(r.env.at("OMP_NUM_THREADS") == "3");
  CHECK(r.user_kept.empty());
}

TEST_CASE("contract variables are the launcher's; extra_env wins over everything") {
  Environment current = {{"RANK", "99"}, {"MASTER_PORT", "1"}};
  auto r = make_rank_environment(identity(2), plan_of({2}, 1), {}, current, fake_finder,
                                 {{"NANO_CHILD", "1"}, {"OMP_NUM_THREADS", "5"}}, "");
  CHECK(r.env.at("RANK") == "2");
  CHECK(r.env.at("MASTER_PORT") == "29511");
  CHECK(r.env.at("NANO_CHILD") == "1");
  CHECK(r.env.at("OMP_NUM_THREADS") == "5");
}

TEST_CASE("the system allocator and no OpenMP leave those variables out") {
  RecipeOptions ro;
  ro.allocator = Allocator::kSystem;
  ro.disable_openmp = true;
  auto r = make_rank_environment(identity(0), plan_of({0}, 1), ro, {}, fake_finder, {}, "");
  CHECK(r.env.count("LD_PRELOAD") == 0);
  CHECK(r.env.count("OMP_NUM_THREADS") == 0);
  CHECK(r.env.at("NANO_CPUS") == "0");
  CHECK(environment_strings({{"A", "1"}, {"B", "x=y"}}) == std::vector<std::string>{"A=1", "B=x=y"});
}

TEST_CASE("the agent's variables are dropped whoever set them, with one warning") {
  Environment current = {{"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"ROLE_NAME", "trainer"}};
  auto r = make_rank_environment(identity(1), plan_of({1}, 1), {}, current, fake_finder,
                                 {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}}, "");
  CHECK(r.env.count("TORCHELASTIC_USE_AGENT_STORE") == 0);
  CHECK(r.env.count("TORCHELASTIC_ENABLE_FILE_TIMER") == 0);
  CHECK(r.env.at("ROLE_NAME") == "default");  // a contract variable, as RANK
  REQUIRE(r.warnings.size() == 1);
  CHECK(r.warnings[0].rfind("not passing TORCHELASTIC_USE_AGENT_STORE=True, TORCHELASTIC_ENABLE_FILE_TIMER=1 to the "
                            "ranks: nano-run runs no torchelastic agent",
                            0) == 0);
}

TEST_CASE("nano's Python folder goes first on PYTHONPATH, once") {
  struct Case {
    std::string pythonpath, folder, result;
  };
  const Case cases[] = {
      {"", "/opt/nano/lib/nano/python", "/opt/nano/lib/nano/python"},
      {"/mine", "/opt/nano/lib/nano/python", "/opt/nano/lib/nano/python:/mine"},
      {"/mine:/theirs", "/n", "/n:/mine:/theirs"},
      {"/mine:/n", "/n", "/mine:/n"},  // already there: the user's order kept
      {"/n", "/n", "/n"},
      {"/n/sub:/nn", "/n", "/n:/n/sub:/nn"},  // a longer entry is another folder
      {"/mine", "", "/mine"},                 // no folder: unchanged
      {"", "", ""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.pythonpath);
    CAPTURE(c.folder);
    CHECK(python_path_with(c.pythonpath, c.folder) == c.result);
  }
  CHECK(python_folder_for("/work/build/bin/nano-run") == "/work/build/lib/nano/python");
  CHECK(python_folder_for("/usr/local/bin/nano-run") == "/usr/local/lib/nano/python");
  CHECK(python_folder_for("/bin/nano-run") == "/lib/nano/python");
  CHECK(python_folder_for("bin/nano-run").empty());
  CHECK(python_folder_for("").empty());

  Environment current = {{"PYTHONPATH", "/mine"}};
  auto r = make_rank_environment(identity(0), plan_of({0}, 1), {}, current, fake_finder, {}, "/n");
  CHECK(r.env.at("PYTHONPATH") == "/n:/mine");
  auto none = make_rank_environment(identity(0), plan_of({0}, 1), {}, {}, fake_finder, {}, "/n");
  CHECK(none.env.at("PYTHONPATH") == "/n");
  auto absent = make_rank_environment(identity(0), plan_of({0}, 1), {}, {}, fake_finder, {}, "");
  CHECK(absent.env.count("PYTHONPATH") == 0);
}
