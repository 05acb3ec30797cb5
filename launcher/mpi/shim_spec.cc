#include "launcher/mpi/shim_spec.h"

#include <nlohmann/json.hpp>

#include <chrono>

#include <nano/error.h>
#include "core/setting_list.h"
#include "launcher/prepare/launch_setup.h"

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

// A setting of core/setting_list.h as JSON and back: text as text(), a duration in milliseconds,
// a bool or a number as itself.
json setting_json(const std::string& value) { return text(value); }
json setting_json(std::chrono::milliseconds value) { return value.count(); }
template <class T>
json setting_json(T value) {
  return value;
}
void setting_of(const json& j, std::string& value) { value = text_of(j); }
void setting_of(const json& j, std::chrono::milliseconds& value) {
  value = std::chrono::milliseconds(j.get<long long>());
}
template <class T>
void setting_of(const json& j, T& value) {
  j.get_to(value);
}

}  // namespace

ShimSpec shim_spec_for(const Setup& s, const std::map<std::string, std::string>& carried) {
  const LaunchOptions& o = s.options;
  ShimSpec spec;
  spec.options.plan = o.plan;
  spec.options.recipe = o.recipe;
  spec.options.topology_xml = o.topology_xml;
  spec.options.synthetic = o.synthetic;
  spec.options.front_end = o.front_end;
#define NANO_SPEC_SETTING(id, key, flag, field, member, metavar, docs, help) spec.options.member = o.member;
  NANO_SHARED_SETTINGS(NANO_SPEC_SETTING)
#undef NANO_SPEC_SETTING
  spec.carried_env = carried;
  spec.master_addr = s.master_addr;
  spec.master_port = s.master_port;
  spec.group_starts.clear();
  for (const auto& g : s.groups) {
    if (g.launch_host) spec.launch_host_groups.push_back(static_cast<int>(spec.group_starts.size()));
    spec.group_starts.push_back(g.first_rank);
  }
  if (spec.group_starts.empty()) spec.group_starts = {0};
  spec.attempt = attempt_of(s);
  spec.session_dir = s.session_dir;
  spec.job_dir = s.job_dir;
  spec.listen_guard = s.listen_guard;
  return spec;
}

std::string encode_shim_spec(const ShimSpec& spec) {
  const LaunchOptions& o = spec.options;
  json plan = {
      {"cores_per_process", o.plan.cores_per_process},
      {"cpu_for_each_process", o.plan.cpu_for_each_process},
      {"use_logical_cores", o.plan.use_logical_cores},
      {"use_efficiency_cores", o.plan.use_efficiency_cores},
  };
  json recipe = {
      {"allocator", static_cast<int>(o.recipe.allocator)},
      {"openmp", static_cast<int>(o.recipe.openmp)},
      {"disable_openmp", o.recipe.disable_openmp},
      {"threads", o.recipe.threads},
  };
  json settings = json::object();
#define NANO_ENCODE_SETTING(id, key, flag, field, member, metavar, docs, help) settings[#key] = setting_json(o.member);
  NANO_SHARED_SETTINGS(NANO_ENCODE_SETTING)
#undef NANO_ENCODE_SETTING
  json attempt = {
      {"job_id", text(spec.attempt.job_id)},
      {"run_id", text(spec.attempt.run_id)},
      {"restart_count", spec.attempt.restart_count},
      {"max_restarts", spec.attempt.max_restarts},
  };
  const json j = {
      {"plan", plan},
      {"recipe", recipe},
      {"topology_xml", text(o.topology_xml)},
      {"synthetic", text(o.synthetic)},
      {"settings", settings},
      {"carried_env", texts(spec.carried_env)},
      {"master_addr", text(spec.master_addr)},
      {"master_port", spec.master_port},
      {"group_starts", spec.group_starts},
      {"launch_host_groups", spec.launch_host_groups},
      {"attempt", attempt},
      {"session_dir", text(spec.session_dir)},
      {"job_dir", text(spec.job_dir)},
      {"listen_guard", {{"library", text(spec.listen_guard.library)}, {"sources", spec.listen_guard.sources}}},
      {"launcher_host", text(spec.launcher_host)},
      {"launcher_port", spec.launcher_port},
      {"front_end", o.front_end == FrontEnd::kProgram ? "program" : "command_line"},
  };
  return j.dump();
}

ShimSpec decode_shim_spec(const std::string& encoded) {
  ShimSpec spec;
  LaunchOptions& o = spec.options;
  try {
    const json j = json::parse(encoded);
    const json& plan = j.at("plan");
    plan.at("cores_per_process").get_to(o.plan.cores_per_process);
    plan.at("cpu_for_each_process").get_to(o.plan.cpu_for_each_process);
    plan.at("use_logical_cores").get_to(o.plan.use_logical_cores);
    plan.at("use_efficiency_cores").get_to(o.plan.use_efficiency_cores);
    const json& recipe = j.at("recipe");
    o.recipe.allocator = static_cast<Allocator>(recipe.at("allocator").get<int>());
    o.recipe.openmp = static_cast<OpenMpRuntime>(recipe.at("openmp").get<int>());
    recipe.at("disable_openmp").get_to(o.recipe.disable_openmp);
    recipe.at("threads").get_to(o.recipe.threads);
    o.topology_xml = text_of(j.at("topology_xml"));
    o.synthetic = text_of(j.at("synthetic"));
    const json& settings = j.at("settings");
#define NANO_DECODE_SETTING(id, key, flag, field, member, metavar, docs, help) setting_of(settings.at(#key), o.member);
    NANO_SHARED_SETTINGS(NANO_DECODE_SETTING)
#undef NANO_DECODE_SETTING
    spec.carried_env = texts_of(j.at("carried_env"));
    spec.master_addr = text_of(j.at("master_addr"));
    j.at("master_port").get_to(spec.master_port);
    j.at("group_starts").get_to(spec.group_starts);
    j.at("launch_host_groups").get_to(spec.launch_host_groups);
    const json& attempt = j.at("attempt");
    spec.attempt.job_id = text_of(attempt.at("job_id"));
    spec.attempt.run_id = text_of(attempt.at("run_id"));
    attempt.at("restart_count").get_to(spec.attempt.restart_count);
    attempt.at("max_restarts").get_to(spec.attempt.max_restarts);
    spec.session_dir = text_of(j.at("session_dir"));
    spec.job_dir = text_of(j.at("job_dir"));
    spec.listen_guard.library = text_of(j.at("listen_guard").at("library"));
    j.at("listen_guard").at("sources").get_to(spec.listen_guard.sources);
    spec.launcher_host = text_of(j.at("launcher_host"));
    j.at("launcher_port").get_to(spec.launcher_port);
    o.front_end = j.at("front_end").get<std::string>() == "program" ? FrontEnd::kProgram : FrontEnd::kCommandLine;
  } catch (const json::exception& e) {
    throw UsageError(std::string("unreadable rank shim spec (") + e.what() + ")");
  }
  if (spec.group_starts.empty()) throw UsageError("unreadable rank shim spec (no group starts)");
  return spec;
}

}  // namespace nano
