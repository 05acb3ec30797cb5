#include "launcher/shim_spec.h"

#include <nlohmann/json.hpp>

#include <nano/error.h>
#include "launcher/launch_setup.h"

namespace nano {
namespace {

using nlohmann::json;

// A string as JSON: itself when it is UTF-8 (nearly always), else its bytes in hex.
json text(const std::string& s) {
  try {
    (void)json(s).dump();
    return s;
  } catch (const json::type_error&) {
  }
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : s) {
    hex += kDigits[c >> 4];
    hex += kDigits[c & 15];
  }
  return json{{"hex", hex}};
}

std::string text_of(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  const std::string hex = j.at("hex").get<std::string>();
  auto nibble = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw UsageError("unreadable rank shim spec (bad hex string)");
  };
  if (hex.size() % 2 != 0) throw UsageError("unreadable rank shim spec (bad hex string)");
  std::string out;
  for (size_t i = 0; i < hex.size(); i += 2) out += static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1]));
  return out;
}

// A variable map as [[name, value], ...], each a text().
json texts(const std::map<std::string, std::string>& vars) {
  json out = json::array();
  for (const auto& [name, value] : vars) out.push_back(json::array({text(name), text(value)}));
  return out;
}

std::map<std::string, std::string> texts_of(const json& j) {
  std::map<std::string, std::string> out;
  for (const json& pair : j) out[text_of(pair.at(0))] = text_of(pair.at(1));
  return out;
}

}  // namespace

ShimSpec shim_spec_for(const Setup& s, const std::map<std::string, std::string>& carried) {
  const LaunchOptions& o = s.options;
  ShimSpec spec;
  spec.plan = o.plan;
  spec.recipe = o.recipe;
  spec.topology_xml = o.topology_xml;
  spec.synthetic = o.synthetic;
  spec.carried_env = carried;
  spec.master_addr = s.master_addr;
  spec.master_port = s.master_port;
  spec.group_starts.clear();
  for (const auto& g : s.groups) spec.group_starts.push_back(g.first_rank);
  if (spec.group_starts.empty()) spec.group_starts = {0};
  spec.attempt = attempt_of(s);
  spec.session_dir = s.session_dir;
  spec.listen_guard = s.listen_guard;
  spec.heartbeat_timeout = o.heartbeat_timeout;
  spec.front_end = o.front_end;
  return spec;
}

std::string encode_shim_spec(const ShimSpec& spec) {
  json plan = {
      {"cores_per_process", spec.plan.cores_per_process}, {"cpu_for_each_process", spec.plan.cpu_for_each_process},
      {"use_logical_cores", spec.plan.use_logical_cores}, {"use_efficiency_cores", spec.plan.use_efficiency_cores},
      {"oversubscribe", spec.plan.oversubscribe},
  };
  json recipe = {
      {"allocator", static_cast<int>(spec.recipe.allocator)},
      {"openmp", static_cast<int>(spec.recipe.openmp)},
      {"disable_openmp", spec.recipe.disable_openmp},
      {"threads", spec.recipe.threads},
  };
  json attempt = {
      {"job_id", text(spec.attempt.job_id)},
      {"run_id", text(spec.attempt.run_id)},
      {"restart_count", spec.attempt.restart_count},
      {"max_restarts", spec.attempt.max_restarts},
  };
  const json j = {
      {"plan", plan},
      {"recipe", recipe},
      {"topology_xml", text(spec.topology_xml)},
      {"synthetic", text(spec.synthetic)},
      {"carried_env", texts(spec.carried_env)},
      {"master_addr", text(spec.master_addr)},
      {"master_port", spec.master_port},
      {"group_starts", spec.group_starts},
      {"attempt", attempt},
      {"session_dir", text(spec.session_dir)},
      {"listen_guard", {{"library", text(spec.listen_guard.library)}, {"sources", spec.listen_guard.sources}}},
      {"launcher_host", text(spec.launcher_host)},
      {"launcher_port", spec.launcher_port},
      {"heartbeat_timeout_ms", spec.heartbeat_timeout.count()},
      {"front_end", spec.front_end == FrontEnd::kProgram ? "program" : "command_line"},
  };
  return j.dump();
}

ShimSpec decode_shim_spec(const std::string& encoded) {
  ShimSpec spec;
  try {
    const json j = json::parse(encoded);
    const json& plan = j.at("plan");
    plan.at("cores_per_process").get_to(spec.plan.cores_per_process);
    plan.at("cpu_for_each_process").get_to(spec.plan.cpu_for_each_process);
    plan.at("use_logical_cores").get_to(spec.plan.use_logical_cores);
    plan.at("use_efficiency_cores").get_to(spec.plan.use_efficiency_cores);
    plan.at("oversubscribe").get_to(spec.plan.oversubscribe);
    const json& recipe = j.at("recipe");
    spec.recipe.allocator = static_cast<Allocator>(recipe.at("allocator").get<int>());
    spec.recipe.openmp = static_cast<OpenMpRuntime>(recipe.at("openmp").get<int>());
    recipe.at("disable_openmp").get_to(spec.recipe.disable_openmp);
    recipe.at("threads").get_to(spec.recipe.threads);
    spec.topology_xml = text_of(j.at("topology_xml"));
    spec.synthetic = text_of(j.at("synthetic"));
    spec.carried_env = texts_of(j.at("carried_env"));
    spec.master_addr = text_of(j.at("master_addr"));
    j.at("master_port").get_to(spec.master_port);
    j.at("group_starts").get_to(spec.group_starts);
    const json& attempt = j.at("attempt");
    spec.attempt.job_id = text_of(attempt.at("job_id"));
    spec.attempt.run_id = text_of(attempt.at("run_id"));
    attempt.at("restart_count").get_to(spec.attempt.restart_count);
    attempt.at("max_restarts").get_to(spec.attempt.max_restarts);
    spec.session_dir = text_of(j.at("session_dir"));
    spec.listen_guard.library = text_of(j.at("listen_guard").at("library"));
    j.at("listen_guard").at("sources").get_to(spec.listen_guard.sources);
    spec.launcher_host = text_of(j.at("launcher_host"));
    j.at("launcher_port").get_to(spec.launcher_port);
    spec.heartbeat_timeout = std::chrono::milliseconds(j.at("heartbeat_timeout_ms").get<long long>());
    spec.front_end = j.at("front_end").get<std::string>() == "program" ? FrontEnd::kProgram : FrontEnd::kCommandLine;
  } catch (const json::exception& e) {
    throw UsageError(std::string("unreadable rank shim spec (") + e.what() + ")");
  }
  if (spec.group_starts.empty()) throw UsageError("unreadable rank shim spec (no group starts)");
  return spec;
}

}  // namespace nano
