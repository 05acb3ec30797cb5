// nano-run: start N pinned ranks of a program and supervise them (cli/launcher.h), or, as the
// mpi backend's rank shim, run one of them (cli/shim.h).
#include <iostream>

#include <nano/error.h>
#include "cli/dry_run.h"
#include "cli/launcher.h"
#include "cli/options.h"
#include "cli/shim.h"
#include "env-init/setting.h"

int main(int argc, char** argv) {
  if (nano::is_rank_shim_invocation(argc, argv)) return nano::run_rank_shim(argc, argv);
  // Every error is worded here, once: settings by nano-run's flags, after "nano-run: ".
  try {
    nano::RunCommand cmd = nano::parse_run_command(std::vector<std::string>(argv + 1, argv + argc));
    if (cmd.kind != nano::RunCommand::kRun) {
      std::cout << cmd.text << "\n";
      return 0;
    }
    if (cmd.dry_run) {
      nano::DryRun plan = nano::dry_run(cmd.launch, cmd.argv);
      std::cout << (cmd.json ? nano::format_dry_run_json(plan) : nano::format_dry_run_table(plan));
      return 0;
    }
    return nano::launch(cmd.launch, cmd.argv).exit_code;
  } catch (const nano::UsageError& e) {
    std::cerr << "nano-run: " << nano::worded(e, nano::command_line_flag) << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "nano-run: error: " << e.what() << "\n";
    return 1;
  }
}
