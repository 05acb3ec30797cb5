#include "launcher/prepare/rank_env.h"

#include <nano/error.h>

#include "core/cpulist.h"
#include "core/rank_contract.h"
#include "launcher/prepare/torchrun_env.h"
#include "launcher/source_filter/source_filter.h"

namespace nano {

RankEnvironment make_rank_environment(const RankIdentity& identity, const RankPlan& plan,
                                      const RecipeOptions& recipe_options, const Environment& current,
                                      const LibraryFinder& finder, const std::map<std::string, std::string>& extra_env,
                                      const std::string& python_folder) {
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
  env["GROUP_WORLD_SIZE"] = std::to_string(identity.group_world_size);
  // torchrun runs one role of workers, "default" unless --role: its ranks are the world's.
  env["ROLE_RANK"] = std::to_string(identity.rank);
  env["ROLE_WORLD_SIZE"] = std::to_string(identity.world_size);
  env["ROLE_NAME"] = "default";
  env["MASTER_ADDR"] = identity.master_addr;
  env["MASTER_PORT"] = std::to_string(identity.master_port);
  env[contract::kCpus] = format_cpu_list(plan.cpus);
  // PyTorch 2.4+ hosts init_process_group's store on libuv by default, and a libtorch built
  // without libuv (Debian 13's 2.6) then fails every stock program's rendezvous. The classic
  // store works on every build; a value the user exported wins.
  env.emplace("USE_LIBUV", "0");
  for (const auto& [name, value] : extra_env) env[name] = value;
  DroppedVariables dropped = drop_agent_variables(env);
  if (!dropped.warning.empty()) out.warnings.push_back(dropped.warning);
  auto pythonpath = env.find("PYTHONPATH");
  const std::string with = python_path_with(pythonpath == env.end() ? "" : pythonpath->second, python_folder);
  if (!with.empty()) env["PYTHONPATH"] = with;
  return out;
}

std::string python_path_with(const std::string& pythonpath, const std::string& folder) {
  if (folder.empty()) return pythonpath;
  if (pythonpath.empty()) return folder;
  size_t start = 0;
  for (;;) {
    const size_t colon = pythonpath.find(':', start);
    if (pythonpath.compare(start, colon == std::string::npos ? std::string::npos : colon - start, folder) == 0)
      return pythonpath;
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  return folder + ":" + pythonpath;
}

void add_listen_guard(Environment& env, const ListenGuard& guard) {
  if (guard.library.empty()) return;
  std::string preload = guard.library;
  auto it = env.find("LD_PRELOAD");
  if (it != env.end()) {
    // The others, in their order, without another copy of the guard.
    std::string rest;
    size_t start = 0;
    const std::string& value = it->second;
    while (start <= value.size()) {
      size_t end = value.find_first_of(": ", start);
      if (end == std::string::npos) end = value.size();
      const std::string one = value.substr(start, end - start);
      if (!one.empty() && one != guard.library) rest += (rest.empty() ? "" : ":") + one;
      start = end + 1;
    }
    if (!rest.empty()) preload += ":" + rest;
  }
  env["LD_PRELOAD"] = preload;
  env[NANO_LISTEN_GUARD_VARIABLE] = listen_guard_value(guard);
}

std::string listen_guard_value(const ListenGuard& guard) {
  std::string value;
  for (const auto& s : guard.sources) value += (value.empty() ? "" : ",") + s;
  return value;
}

void check_listen_guard(const ListenGuard& guard) {
  if (guard.library.empty()) return;
  const std::string value = listen_guard_value(guard);
  uint32_t sources[NANO_MAX_SOURCES];
  // The value must be the sources themselves: "off" is not for a guard that is preloaded.
  if (nano_read_guard(value.c_str(), sources, NANO_MAX_SOURCES) != static_cast<int>(guard.sources.size()))
    throw UsageError("bad " NANO_LISTEN_GUARD_VARIABLE "='" + value +
                     "': expected IPv4 addresses separated by commas, or off");
}

std::string listen_guard_library_for(const std::string& executable) {
  const std::string python = python_folder_for(executable);
  return python.empty() ? ""
                        : python.substr(0, python.size() - std::string("python").size()) + "libnano_listen_guard.so";
}

std::string python_folder_for(const std::string& executable) {
  if (executable.empty() || executable[0] != '/') return "";
  const std::string folder = executable.substr(0, executable.rfind('/'));  // "" = the root
  const size_t up = folder.rfind('/');
  return (up == std::string::npos ? std::string() : folder.substr(0, up)) + "/lib/nano/python";
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
