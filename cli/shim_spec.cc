#include "cli/shim_spec.h"

#include <nlohmann/json.hpp>

#include <nano/error.h>
#include "cli/launch_setup.h"

namespace nano {

ShimSpec shim_spec_for(const LaunchOptions& o, const Setup& s, const std::map<std::string, std::string>& carried) {
  ShimSpec spec;
  spec.plan = o.plan;
  spec.recipe = o.recipe;
  spec.topology_xml = o.topology_xml;
  spec.synthetic = o.synthetic;
  spec.extra_env = o.extra_env;
  spec.carried_env = carried;
  spec.master_addr = s.master_addr;
  spec.master_port = s.master_port;
  spec.group_starts.clear();
  for (const auto& g : s.groups) spec.group_starts.push_back(g.first_rank);
  if (spec.group_starts.empty()) spec.group_starts = {0};
  spec.attempt = attempt_of(s, o);
  spec.heartbeat_timeout = o.heartbeat_timeout;
  spec.front_end = o.front_end;
  return spec;
}

std::string encode_shim_spec(const ShimSpec& spec) {
  nlohmann::json plan = {
      {"cores_per_process", spec.plan.cores_per_process}, {"cpu_for_each_process", spec.plan.cpu_for_each_process},
      {"use_logical_cores", spec.plan.use_logical_cores}, {"use_efficiency_cores", spec.plan.use_efficiency_cores},
      {"oversubscribe", spec.plan.oversubscribe},
  };
  nlohmann::json recipe = {
      {"allocator", static_cast<int>(spec.recipe.allocator)},
      {"openmp", static_cast<int>(spec.recipe.openmp)},
      {"disable_openmp", spec.recipe.disable_openmp},
      {"threads", spec.recipe.threads},
  };
  nlohmann::json attempt = {
      {"job_id", spec.attempt.job_id},
      {"run_id", spec.attempt.run_id},
      {"restart_count", spec.attempt.restart_count},
      {"max_restarts", spec.attempt.max_restarts},
  };
  const nlohmann::json j = {
      {"plan", plan},
      {"recipe", recipe},
      {"topology_xml", spec.topology_xml},
      {"synthetic", spec.synthetic},
      {"extra_env", spec.extra_env},
      {"carried_env", spec.carried_env},
      {"master_addr", spec.master_addr},
      {"master_port", spec.master_port},
      {"group_starts", spec.group_starts},
      {"attempt", attempt},
      {"launcher_host", spec.launcher_host},
      {"launcher_port", spec.launcher_port},
      {"token", spec.token},
      {"heartbeat_timeout_ms", spec.heartbeat_timeout.count()},
      {"front_end", spec.front_end == FrontEnd::kProgram ? "program" : "command_line"},
  };
  return j.dump();
}

ShimSpec decode_shim_spec(const std::string& text) {
  ShimSpec spec;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    const nlohmann::json& plan = j.at("plan");
    plan.at("cores_per_process").get_to(spec.plan.cores_per_process);
    plan.at("cpu_for_each_process").get_to(spec.plan.cpu_for_each_process);
    plan.at("use_logical_cores").get_to(spec.plan.use_logical_cores);
    plan.at("use_efficiency_cores").get_to(spec.plan.use_efficiency_cores);
    plan.at("oversubscribe").get_to(spec.plan.oversubscribe);
    const nlohmann::json& recipe = j.at("recipe");
    spec.recipe.allocator = static_cast<Allocator>(recipe.at("allocator").get<int>());
    spec.recipe.openmp = static_cast<OpenMpRuntime>(recipe.at("openmp").get<int>());
    recipe.at("disable_openmp").get_to(spec.recipe.disable_openmp);
    recipe.at("threads").get_to(spec.recipe.threads);
    j.at("topology_xml").get_to(spec.topology_xml);
    j.at("synthetic").get_to(spec.synthetic);
    j.at("extra_env").get_to(spec.extra_env);
    j.at("carried_env").get_to(spec.carried_env);
    j.at("master_addr").get_to(spec.master_addr);
    j.at("master_port").get_to(spec.master_port);
    j.at("group_starts").get_to(spec.group_starts);
    const nlohmann::json& attempt = j.at("attempt");
    attempt.at("job_id").get_to(spec.attempt.job_id);
    attempt.at("run_id").get_to(spec.attempt.run_id);
    attempt.at("restart_count").get_to(spec.attempt.restart_count);
    attempt.at("max_restarts").get_to(spec.attempt.max_restarts);
    j.at("launcher_host").get_to(spec.launcher_host);
    j.at("launcher_port").get_to(spec.launcher_port);
    j.at("token").get_to(spec.token);
    spec.heartbeat_timeout = std::chrono::milliseconds(j.at("heartbeat_timeout_ms").get<long long>());
    spec.front_end = j.at("front_end").get<std::string>() == "program" ? FrontEnd::kProgram : FrontEnd::kCommandLine;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(std::string("unreadable rank shim spec (") + e.what() + ")");
  }
  if (spec.group_starts.empty()) throw UsageError("unreadable rank shim spec (no group starts)");
  return spec;
}

}  // namespace nano
