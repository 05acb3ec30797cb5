#include "launcher/prepare/carried_env.h"

#include <nano/error.h>
#include "core/rank_contract.h"
#include "core/setting.h"

namespace nano {
namespace {

bool carried_name(const std::string& name) {
  if (secret_variable(name)) return false;
  for (const char* exact : {"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "MALLOC_CONF"})
    if (name == exact) return true;
  // NANO_CPUS is each rank's own (its shim sets it from its host's plan).
  if (name == contract::kCpus) return false;
  for (const char* prefix : {"NANO_", "OMP_", "KMP_", "GOMP_", "MKL_", "OPENBLAS_", "DNNL_", "ONEDNN_", "TORCH_",
                             "PYTORCH_", "GLOO_", "TCMALLOC_", "TORCHELASTIC_"})
    if (name.rfind(prefix, 0) == 0) return true;
  return false;
}

bool valid_name(const std::string& name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  for (char c : name)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return true;
}

}  // namespace

bool secret_variable(const std::string& name) { return name == contract::kJobSecret || name == contract::kPythonKey; }

std::map<std::string, std::string> carried_environment(const Environment& env,
                                                       const std::map<std::string, std::string>& named) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : env)
    if (carried_name(name)) out[name] = value;
  for (const auto& [name, value] : named)
    if (!secret_variable(name)) out[name] = value;
  return out;
}

std::map<std::string, std::string> carried_secrets(const std::map<std::string, std::string>& named) {
  std::map<std::string, std::string> out;
  for (const auto& [name, value] : named)
    if (secret_variable(name) && name != contract::kJobSecret) out[kCarriedSecretPrefix + name] = value;
  return out;
}

Environment restored_secrets(Environment env) {
  const std::string prefix = kCarriedSecretPrefix;
  for (auto it = env.lower_bound(prefix); it != env.end() && it->first.rfind(prefix, 0) == 0;) {
    const std::string name = it->first.substr(prefix.size());
    if (secret_variable(name)) env[name] = it->second;
    it = env.erase(it);
  }
  return env;
}

std::pair<std::string, std::string> parse_env_option(const std::string& spec, const Environment& env) {
  const auto eq = spec.find('=');
  const std::string name = spec.substr(0, eq);
  if (!valid_name(name)) {
    throw SettingError(
        Setting::kEnv, spec,
        "invalid value '" + spec + "' for {env}: expected NAME or NAME=VALUE with NAME made of letters, digits and _");
  }
  if (eq != std::string::npos) return {name, spec.substr(eq + 1)};
  auto it = env.find(name);
  if (it == env.end())
    throw SettingError(Setting::kEnv, spec, "{env} " + name + ": " + name + " is not set in nano-run's environment");
  return {name, it->second};
}

}  // namespace nano
