#include "core/setting.h"

#include <iterator>

namespace nano {
namespace {

struct Known {
  Setting setting;
  const char* key;
  const char* flag;
  const char* field = nullptr;  // TorchNanoOptions' name, where it is not the key
};

// One row per setting: its key, nano-run's flag and, where it differs from the key, the
// TorchNanoOptions field.
constexpr Known kSettings[] = {
    {Setting::kNumProcesses, "num_processes", "--num-processes"},
    {Setting::kCoresPerProcess, "cores_per_process", "--cores-per-process"},
    {Setting::kCpuForEachProcess, "cpu_for_each_process", "--cpu-for-each-process"},
    {Setting::kUseLogicalCores, "use_logical_cores", "--use-logical-cores"},
    {Setting::kUseEfficiencyCores, "use_efficiency_cores", "--use-efficiency-cores"},
    {Setting::kOversubscribe, "oversubscribe", "--oversubscribe"},
    {Setting::kTopology, "topology", "--topology"},
    {Setting::kSynthetic, "synthetic", "--synthetic"},
    {Setting::kAllocator, "allocator", "--allocator"},
    {Setting::kOpenMp, "openmp", "--openmp"},
    {Setting::kDisableOpenMp, "disable_openmp", "--disable-openmp"},
    {Setting::kThreads, "threads", "--threads"},
    {Setting::kBackend, "backend", "--backend", "distributed_backend"},
    {Setting::kHostfile, "hostfile", "--hostfile"},
    {Setting::kHosts, "hosts", "--hosts"},
    {Setting::kMasterAddr, "master_addr", "--master-addr"},
    {Setting::kMasterPort, "master_port", "--master-port"},
    {Setting::kEnv, "env", "--env"},
    {Setting::kLogDir, "log_dir", "--log-dir"},
    {Setting::kOutputRanks, "output_ranks", "--output-ranks"},
    {Setting::kGracePeriod, "grace_period", "--grace-period", "grace_period_ms"},
    {Setting::kHeartbeatTimeout, "heartbeat_timeout", "--heartbeat-timeout", "heartbeat_timeout_ms"},
    {Setting::kMaxRestarts, "max_restarts", "--max-restarts"},
    {Setting::kRestartDelay, "restart_delay", "--restart-delay", "restart_delay_ms"},
    {Setting::kDryRun, "dry_run", "--dry-run"},
    {Setting::kJson, "json", "--json"},
    {Setting::kTune, "tune", "--tune"},
    {Setting::kTuneSeconds, "tune_seconds", "--tune-seconds"},
    {Setting::kTuneSteps, "tune_steps", "--tune-steps"},
    {Setting::kTuneCandidates, "tune_candidates", "--tune-candidates"},
    {Setting::kTuneAllocators, "tune_allocators", "--tune-allocators"},
    {Setting::kTuneMetric, "tune_metric", "--tune-metric"},
    {Setting::kTuneMetricPerRank, "tune_metric_per_rank", "--tune-metric-per-rank"},
    {Setting::kMaxRanks, "max_ranks", "--max-ranks"},
    {Setting::kPrecision, "precision", "--precision"},
    {Setting::kChannelsLast, "channels_last", "--channels-last"},
    {Setting::kCommunicator, "communicator", "--communicator"},
};

// The table is in the enumeration's order, one row per enumerator, so a setting is its index.
constexpr bool in_enum_order() {
  for (size_t i = 0; i < std::size(kSettings); ++i)
    if (static_cast<size_t>(kSettings[i].setting) != i) return false;
  return std::size(kSettings) == static_cast<size_t>(Setting::kCommunicator) + 1;
}
static_assert(in_enum_order(), "kSettings: one row per Setting, in its order");

const Known& known(Setting setting) { return kSettings[static_cast<size_t>(setting)]; }

const Known* by_key(const std::string& key) {
  for (const Known& k : kSettings)
    if (key == k.key) return &k;
  return nullptr;
}

std::string fill(const std::string& text, SettingNames names) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const size_t close = text[i] == '{' ? text.find('}', i) : std::string::npos;
    const Known* k = close == std::string::npos ? nullptr : by_key(text.substr(i + 1, close - i - 1));
    if (!k) {
      out += text[i++];
      continue;
    }
    out += names(k->setting);
    i = close + 1;
  }
  return out;
}

std::string key_name(Setting setting) { return setting_key(setting); }

}  // namespace

const char* setting_key(Setting setting) { return known(setting).key; }

std::string command_line_flag(Setting setting) { return known(setting).flag; }

std::string program_field(Setting setting) {
  const Known& k = known(setting);
  return k.field ? k.field : k.key;
}

SettingNames names_of(FrontEnd front_end) {
  return front_end == FrontEnd::kProgram ? program_field : command_line_flag;
}

SettingError::SettingError(Setting setting, std::string value, std::string text)
    : UsageError(fill(text, key_name)), setting_(setting), value_(std::move(value)), text_(std::move(text)) {}

std::string SettingError::worded(SettingNames names) const { return fill(text_, names); }

std::string worded_text(const std::string& text, SettingNames names) { return fill(text, names); }

std::string worded(const std::exception& error, SettingNames names) {
  if (const auto* setting = dynamic_cast<const SettingError*>(&error)) return setting->worded(names);
  return error.what();
}

const char* docs_page(Setting setting) {
  switch (setting) {
    case Setting::kNumProcesses:
    case Setting::kCoresPerProcess:
    case Setting::kCpuForEachProcess:
    case Setting::kUseLogicalCores:
    case Setting::kUseEfficiencyCores:
    case Setting::kOversubscribe:
    case Setting::kTopology:
    case Setting::kSynthetic:
    case Setting::kAllocator:
    case Setting::kOpenMp:
    case Setting::kDisableOpenMp:
    case Setting::kThreads:
    case Setting::kTune:
    case Setting::kTuneSeconds:
    case Setting::kTuneSteps:
    case Setting::kTuneCandidates:
    case Setting::kTuneAllocators:
    case Setting::kTuneMetric:
    case Setting::kTuneMetricPerRank:
    case Setting::kMaxRanks: return "docs/tuning.md";
    case Setting::kHostfile:
    case Setting::kHosts:
    case Setting::kMasterAddr:
    case Setting::kMasterPort: return "docs/multihost.md";
    case Setting::kGracePeriod:
    case Setting::kHeartbeatTimeout:
    case Setting::kMaxRestarts:
    case Setting::kRestartDelay: return "docs/failures.md";
    case Setting::kPrecision:
    case Setting::kChannelsLast: return "docs/precision.md";
    case Setting::kCommunicator: return "docs/cpp-api.md";
    case Setting::kBackend:
    case Setting::kEnv:
    case Setting::kLogDir:
    case Setting::kOutputRanks:
    case Setting::kDryRun:
    case Setting::kJson: break;
  }
  return "docs/nano-run.md";
}

std::string docs_page_of(const std::exception& error, const std::string& fallback) {
  if (const auto* setting = dynamic_cast<const SettingError*>(&error)) return docs_page(setting->setting());
  return fallback;
}

}  // namespace nano
