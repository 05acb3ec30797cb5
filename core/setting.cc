#include "core/setting.h"

#include <iterator>

namespace nano {
namespace {

struct Known {
  Setting setting;
  const char* key;
  const char* flag;
  const char* field;  // TorchNanoOptions' name ("" where it is the key)
  const char* docs;   // docs_page()
};

// One row per setting: its key, nano-run's flag, where it differs from the key the
// TorchNanoOptions field, and its docs page; the settings every front end honours come from
// their list.
constexpr Known kSettings[] = {
    {Setting::kNumProcesses, "num_processes", "--num-processes", "", "docs/tuning.md"},
    {Setting::kCoresPerProcess, "cores_per_process", "--cores-per-process", "", "docs/tuning.md"},
    {Setting::kCpuForEachProcess, "cpu_for_each_process", "--cpu-for-each-process", "", "docs/tuning.md"},
    {Setting::kUseLogicalCores, "use_logical_cores", "--use-logical-cores", "", "docs/tuning.md"},
    {Setting::kUseEfficiencyCores, "use_efficiency_cores", "--use-efficiency-cores", "", "docs/tuning.md"},
    {Setting::kTopology, "topology", "--topology", "", "docs/tuning.md"},
    {Setting::kSynthetic, "synthetic", "--synthetic", "", "docs/tuning.md"},
    {Setting::kAllocator, "allocator", "--allocator", "", "docs/tuning.md"},
    {Setting::kOpenMp, "openmp", "--openmp", "", "docs/tuning.md"},
    {Setting::kDisableOpenMp, "disable_openmp", "--disable-openmp", "", "docs/tuning.md"},
    {Setting::kThreads, "threads", "--threads", "", "docs/tuning.md"},
    {Setting::kBackend, "backend", "--backend", "distributed_backend", "docs/nano-run.md"},
    {Setting::kMasterAddr, "master_addr", "--master-addr", "", "docs/multihost.md"},
    {Setting::kMasterPort, "master_port", "--master-port", "", "docs/multihost.md"},
    {Setting::kEnv, "env", "--env", "", "docs/nano-run.md"},
    {Setting::kOutputRanks, "output_ranks", "--output-ranks", "", "docs/nano-run.md"},
    {Setting::kDryRun, "dry_run", "--dry-run", "", "docs/nano-run.md"},
    {Setting::kJson, "json", "--json", "", "docs/nano-run.md"},
    {Setting::kTune, "tune", "--tune", "", "docs/tuning.md"},
    {Setting::kTuneSeconds, "tune_seconds", "--tune-seconds", "", "docs/tuning.md"},
    {Setting::kTuneSteps, "tune_steps", "--tune-steps", "", "docs/tuning.md"},
    {Setting::kTuneCandidates, "tune_candidates", "--tune-candidates", "", "docs/tuning.md"},
    {Setting::kTuneAllocators, "tune_allocators", "--tune-allocators", "", "docs/tuning.md"},
    {Setting::kTuneMetric, "tune_metric", "--tune-metric", "", "docs/tuning.md"},
    {Setting::kTuneMetricPerRank, "tune_metric_per_rank", "--tune-metric-per-rank", "", "docs/tuning.md"},
    {Setting::kMaxRanks, "max_ranks", "--max-ranks", "", "docs/tuning.md"},
    {Setting::kPrecision, "precision", "--precision", "", "docs/precision.md"},
    {Setting::kChannelsLast, "channels_last", "--channels-last", "", "docs/precision.md"},
    {Setting::kCommunicator, "communicator", "--communicator", "", "docs/cpp-api.md"},
#define NANO_SETTING_ROW(id, key, flag, field, member, metavar, docs, help) {Setting::id, #key, flag, #field, docs},
    NANO_SHARED_SETTINGS(NANO_SETTING_ROW)
#undef NANO_SETTING_ROW
};

// The table is in the enumeration's order, one row per enumerator, so a setting is its index.
constexpr bool in_enum_order() {
  for (size_t i = 0; i < std::size(kSettings); ++i)
    if (static_cast<size_t>(kSettings[i].setting) != i) return false;
  return std::size(kSettings) == static_cast<size_t>(kSettingCount);
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
  return *k.field ? k.field : k.key;
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

const char* docs_page(Setting setting) { return known(setting).docs; }

std::string docs_page_of(const std::exception& error, const std::string& fallback) {
  if (const auto* setting = dynamic_cast<const SettingError*>(&error)) return docs_page(setting->setting());
  return fallback;
}

}  // namespace nano
