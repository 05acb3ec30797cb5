#include "core/setting.h"

#include <doctest/doctest.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

using namespace nano;

namespace {

std::string shouted(Setting setting) { return std::string("<") + setting_key(setting) + ">"; }

}  // namespace

TEST_CASE("every setting has its own key and nano-run flag") {
  std::set<std::string> keys, flags;
  for (int i = 0; i < kSettingCount; ++i) {
    const auto setting = static_cast<Setting>(i);
    CAPTURE(i);
    const std::string key = setting_key(setting);
    CHECK(key.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == std::string::npos);
    // nano-run's flags are the keys with dashes, apart from none so far.
    std::string dashed = key;
    for (char& c : dashed)
      if (c == '_') c = '-';
    CHECK(command_line_flag(setting) == "--" + dashed);
    keys.insert(key);
    flags.insert(command_line_flag(setting));
  }
  CHECK(keys.size() == static_cast<size_t>(kSettingCount));
  CHECK(flags.size() == keys.size());
}

TEST_CASE("every setting's docs page is a page of docs/, and errors point to it") {
  for (int i = 0; i < kSettingCount; ++i) {
    const auto setting = static_cast<Setting>(i);
    CAPTURE(setting_key(setting));
    CHECK(std::filesystem::exists(std::string(NANO_SOURCE_DIR) + "/" + docs_page(setting)));
  }
  struct Row {
    Setting setting;
    std::string page;
  };
  const std::vector<Row> table = {
      {Setting::kThreads, "docs/tuning.md"},       {Setting::kTuneMetricPerRank, "docs/tuning.md"},
      {Setting::kHosts, "docs/multihost.md"},      {Setting::kMaxRestarts, "docs/failures.md"},
      {Setting::kPrecision, "docs/precision.md"},  {Setting::kBackend, "docs/nano-run.md"},
      {Setting::kCommunicator, "docs/cpp-api.md"},
  };
  for (const Row& row : table) CHECK(docs_page(row.setting) == row.page);
  CHECK(docs_page_of(SettingError(Setting::kHosts, "x", "{hosts} x"), "docs/nano-run.md") == "docs/multihost.md");
  CHECK(docs_page_of(UsageError("program not found: x"), "docs/nano-run.md") == "docs/nano-run.md");
}

TEST_CASE("a SettingError keeps the setting and value and is worded by each front end") {
  struct Row {
    std::string text;
    std::string by_key;
    std::string by_flag;
    std::string by_other;
  };
  const std::vector<Row> table = {
      {"{threads} must be at least 1, got 0", "threads must be at least 1, got 0",
       "--threads must be at least 1, got 0", "<threads> must be at least 1, got 0"},
      {"{hosts} need the mpi backend, not {backend} subprocess", "hosts need the mpi backend, not backend subprocess",
       "--hosts need the mpi backend, not --backend subprocess",
       "<hosts> need the mpi backend, not <backend> subprocess"},
      // Braces that name no setting stay as they are.
      {"{nothing} and {} and {threads", "{nothing} and {} and {threads", "{nothing} and {} and {threads",
       "{nothing} and {} and {threads"},
      {"ends with {master_port}", "ends with master_port", "ends with --master-port", "ends with <master_port>"},
  };
  for (const Row& row : table) {
    CAPTURE(row.text);
    const SettingError e(Setting::kThreads, "0", row.text);
    CHECK(std::string(e.what()) == row.by_key);
    CHECK(e.worded(command_line_flag) == row.by_flag);
    CHECK(e.worded(shouted) == row.by_other);
    CHECK(worded(e, command_line_flag) == row.by_flag);
    CHECK(worded_text(row.text, shouted) == row.by_other);
    CHECK(e.setting() == Setting::kThreads);
    CHECK(e.value() == "0");
  }
  // Any other error is worded as it is.
  CHECK(worded(UsageError("{threads} stays"), command_line_flag) == "{threads} stays");
}
