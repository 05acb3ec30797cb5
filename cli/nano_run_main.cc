// nano-run: start N pinned ranks of a program and supervise them (launcher/launch/launcher.h), tune the
// program's layout first (--tune, -n auto: launcher/tune/auto_layout.h), or, as the mpi backend's rank
// shim, run one of them (cli/shim.h).
#include <iostream>

#include <nano/error.h>
#include "cli/options.h"
#include "cli/shim.h"
#include "core/setting.h"
#include "launcher/launch/dry_run.h"
#include "launcher/launch/launcher.h"
#include "launcher/tune/auto_layout.h"

namespace {

void say(const std::string& line) { std::cerr << line << std::endl; }

int print_dry_run(const nano::RunCommand& cmd, const nano::LaunchOptions& launch) {
  nano::DryRun plan = nano::dry_run(launch, cmd.argv);
  std::cout << (cmd.json ? nano::format_dry_run_json(plan) : nano::format_dry_run_table(plan));
  return 0;
}

// --tune (with or without -n auto) and -n auto: the layout first, then (unless --tune alone)
// the launch with it.
int tuned_run(const nano::RunCommand& cmd) {
  if (cmd.auto_ranks && (!cmd.launch.hosts.empty() || !cmd.launch.hostfile.empty()))
    throw nano::SettingError(nano::Setting::kNumProcesses, "auto",
                             "{num_processes} auto tunes the ranks of one host; with {hosts} or {hostfile} give a "
                             "count");
  nano::StoredLayout store = nano::look_up_layout(cmd.launch, cmd.argv);
  if (!store.warning.empty()) say("nano-run: warning: " + store.warning);
  if (cmd.dry_run) {
    if (!cmd.tune && store.hit) {
      say("nano-run: -n auto: " + nano::stored_layout_text(*store.hit) + " (stored in " + store.path + ")");
      return print_dry_run(cmd, nano::with_layout(cmd.launch, store.hit->layout));
    }
    const auto layouts = nano::prepare_tuning(cmd.launch, cmd.tune_options, cmd.argv);
    std::cout << (cmd.tune ? "--tune" : "-n auto: nothing stored for this program on this machine; it") << " would try "
              << layouts.size() << " layouts, fewest ranks first:\n";
    for (const auto& l : layouts) std::cout << "  " << nano::layout_text(l) << "\n";
    return 0;
  }
  std::optional<nano::TuneEntry> chosen = cmd.tune ? std::nullopt : store.hit;
  if (chosen) {
    say("nano-run: -n auto: " + nano::stored_layout_text(*chosen));
  } else {
    if (!cmd.tune) say("nano-run: -n auto: nothing tuned for this program on this machine yet; tuning first");
    int interrupted_by = 0;
    chosen = nano::tune_and_store(cmd.launch, cmd.tune_options, cmd.argv, store, say, &interrupted_by);
    if (interrupted_by) return 128 + interrupted_by;
    if (!chosen) return 1;
    if (!cmd.auto_ranks) return 0;
  }
  return nano::launch(nano::with_layout(cmd.launch, chosen->layout), cmd.argv).exit_code;
}

}  // namespace

int main(int argc, char** argv) {
  if (nano::is_rank_shim_invocation(argc, argv)) return nano::run_rank_shim(argc, argv);
  // Every error is worded here, once: settings by nano-run's flags, after "nano-run: ".
  try {
    nano::RunCommand cmd = nano::parse_run_command(std::vector<std::string>(argv + 1, argv + argc));
    if (cmd.kind != nano::RunCommand::kRun) {
      std::cout << cmd.text << "\n";
      return 0;
    }
    if (cmd.tune || cmd.auto_ranks) return tuned_run(cmd);
    if (cmd.dry_run) return print_dry_run(cmd, cmd.launch);
    return nano::launch(cmd.launch, cmd.argv).exit_code;
  } catch (const nano::UsageError& e) {
    std::cerr << "nano-run: " << nano::worded(e, nano::command_line_flag) << " (see "
              << nano::docs_page_of(e, "docs/nano-run.md") << ")\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "nano-run: error: " << e.what() << "\n";
    return 1;
  }
}
