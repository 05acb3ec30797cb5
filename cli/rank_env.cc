#include "cli/rank_env.h"

#include "env-init/cpulist.h"

namespace nano {

RankEnvironment make_rank_environment(const RankIdentity& identity, const RankPlan& plan,
                                      const RecipeOptions& recipe_options, const Environment& current,
                                      const LibraryFinder& finder,
                                      const std::map<std::string, std::string>& extra_env) {
  RankEnvironment out;
  Recipe recipe = make_recipe(plan.threads, plan.cpus, recipe_options, current, finder);
  out.env = apply_recipe(recipe, current);
  out.warnings = recipe.warnings;
  for (const auto& setting : recipe.set) {
    if (setting.name == "LD_PRELOAD") continue;
    if (setting.name == "OMP_NUM_THREADS" && recipe_options.threads > 0) continue;
    auto it = current.find(setting.name);
    if (it != current.end() && it->second != setting.value) {
      out.env[setting.name] = it->second;
      out.user_kept.push_back(setting.name);
    }
  }
  Environment& env = out.env;
  env["RANK"] = std::to_string(identity.rank);
  env["LOCAL_RANK"] = std::to_string(identity.local_rank);
  env["WORLD_SIZE"] = std::to_string(identity.world_size);
  env["LOCAL_WORLD_SIZE"] = std::to_string(identity.local_world_size);
  env["GROUP_RANK"] = std::to_string(identity.group_rank);
  env["MASTER_ADDR"] = identity.master_addr;
  env["MASTER_PORT"] = std::to_string(identity.master_port);
  env["NANO_CPUS"] = format_cpu_list(plan.cpus);
  // PyTorch 2.4+ hosts init_process_group's store on libuv by default, and a libtorch built
  // without libuv (Debian 13's 2.6) then fails every stock program's rendezvous. The classic
  // store works on every build; a value the user exported wins.
  env.emplace("USE_LIBUV", "0");
  for (const auto& [name, value] : extra_env) env[name] = value;
  return out;
}

std::string user_kept_warning(const std::vector<std::string>& user_kept, const Environment& current) {
  if (user_kept.empty()) return "";
  std::string list;
  for (const auto& name : user_kept) {
    if (!list.empty()) list += ", ";
    auto it = current.find(name);
    list += name + "=" + (it == current.end() ? "" : it->second);
  }
  return "nano-run: keeping your exported " + list +
         " instead of the planned value for every rank (unset to use the plan)";
}

std::vector<std::string> environment_strings(const Environment& env) {
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(name + "=" + value);
  return out;
}

}  // namespace nano
