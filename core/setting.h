#pragma once
// The settings of a launch, named once. A setting is one field of one typed structure
// (PlanOptions, RecipeOptions, LaunchOptions); its user-facing name belongs to the front end
// the user typed it into (nano-run's and nano-init's flags, TorchNanoOptions' fields). Code
// below the front ends throws SettingError, which says which setting and which value were
// wrong and leaves the wording of the setting's name to the front end (in its main or at
// its API boundary, once).
#include <string>

#include <nano/error.h>
#include "core/setting_list.h"

namespace nano {

/// Every setting an error can name.
enum class Setting {
  kNumProcesses,
  kCoresPerProcess,
  kCpuForEachProcess,
  kUseLogicalCores,
  kUseEfficiencyCores,
  kTopology,
  kSynthetic,
  kAllocator,
  kOpenMp,
  kDisableOpenMp,
  kThreads,
  kBackend,
  kMasterAddr,
  kMasterPort,
  kEnv,
  kOutputRanks,
  kDryRun,
  kJson,
  kTune,
  kTuneSeconds,
  kTuneSteps,
  kTuneCandidates,
  kTuneAllocators,
  kTuneMetric,
  kTuneMetricPerRank,
  kMaxRanks,
  kPrecision,
  kChannelsLast,
  kCommunicator,
#define NANO_SETTING_ENUMERATOR(id, key, flag, field, member, metavar, docs, help) id,
  NANO_SHARED_SETTINGS(NANO_SETTING_ENUMERATOR)  // the settings every front end honours (core/setting_list.h)
#undef NANO_SETTING_ENUMERATOR
};

#define NANO_SETTING_ONE(...) +1
/// How many settings there are: Setting's enumerators are 0 .. kSettingCount - 1.
inline constexpr int kSettingCount =
    static_cast<int>(Setting::kCommunicator) + 1 NANO_SHARED_SETTINGS(NANO_SETTING_ONE);
#undef NANO_SETTING_ONE

/// The setting's key, in snake case like the fields of the options structures ("num_processes",
/// "cpu_for_each_process"): what placeholders in SettingError texts spell, and the wording of an
/// error no front end reworded.
const char* setting_key(Setting setting);

/// How one front end calls each setting.
using SettingNames = std::string (*)(Setting);

/// nano-run's flag for `setting` ("--num-processes"); nano-init uses the same flags but one.
std::string command_line_flag(Setting setting);

/// TorchNanoOptions' field for `setting` ("distributed_backend", "grace_period_ms"); the key
/// where TorchNanoOptions has no such field.
std::string program_field(Setting setting);

/// Who asked for a launch: nano-run's command line or a program (TorchNano, nano()). A launch
/// keeps it so that what reports after the front end returned (the rank shims on other hosts)
/// still names settings the way the user typed them.
enum class FrontEnd { kCommandLine, kProgram };

/// command_line_flag or program_field.
SettingNames names_of(FrontEnd front_end);

/// A wrong value of one setting. Its text names settings by placeholders, "{num_processes}"
/// (a setting_key in braces), so that every front end words the same error with its own names:
///     SettingError(Setting::kThreads, "0", "{threads} must be at least 1, got 0")
/// reads "--threads must be at least 1, got 0" in nano-run and "threads must be ..." in a
/// program. A text may name several settings ("{hosts} need the mpi backend, not {backend} ...").
class SettingError : public UsageError {
 public:
  SettingError(Setting setting, std::string value, std::string text);

  Setting setting() const { return setting_; }
  /// The offending value as the user gave it ("" when the problem is a combination).
  const std::string& value() const { return value_; }
  /// The message with its placeholders, as given.
  const std::string& text() const { return text_; }
  /// The message with every placeholder replaced by `names`' name of that setting.
  std::string worded(SettingNames names) const;

 private:
  Setting setting_;
  std::string value_;
  std::string text_;
};

/// `text` with its placeholders replaced by `names`' names: for notes that name settings
/// ("efficiency cores ... are left out; {use_efficiency_cores} uses them").
std::string worded_text(const std::string& text, SettingNames names);

/// The message of `error` as the front end with `names` words it: a SettingError's placeholders
/// replaced, any other error's what() as it is.
std::string worded(const std::exception& error, SettingNames names);

/// The page of nano's docs that explains `setting`, relative to the source tree (installed in
/// share/doc/nano): "docs/tuning.md" for the core split, "docs/multihost.md" for the hosts...
const char* docs_page(Setting setting);

/// The page a usage error points to: `error`'s setting's page when it names one, else `fallback`
/// (the front end's own page, "docs/nano-run.md").
std::string docs_page_of(const std::exception& error, const std::string& fallback);

}  // namespace nano
