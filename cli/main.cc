// nano-run: start N pinned ranks of a program and supervise them (cli/launcher.h).
#include <iostream>

#include <nlohmann/json.hpp>

#include <nano/error.h>
#include "cli/dry_run.h"
#include "cli/launcher.h"
#include "cli/options.h"

int main(int argc, char** argv) {
  if (nano::is_rank_shim_invocation(argc, argv)) return nano::run_rank_shim(argc, argv);
  try {
    nano::RunCommand cmd = nano::parse_run_command(std::vector<std::string>(argv + 1, argv + argc));
    if (cmd.kind != nano::RunCommand::kRun) {
      std::cout << cmd.text << "\n";
      return 0;
    }
    if (cmd.rank_shim) throw nano::UsageError(std::string(nano::kRankShimFlag) + " must be the first argument");
    if (cmd.dry_run) {
      nano::DryRun plan = nano::dry_run(cmd.launch, cmd.argv);
      std::cout << (cmd.json ? nano::format_dry_run_json(plan) : nano::format_dry_run_table(plan));
      return 0;
    }
    return nano::launch(cmd.launch, cmd.argv).exit_code;
  } catch (const nano::UsageError& e) {
    std::cerr << "nano-run: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "nano-run: error: " << e.what() << "\n";
    return 1;
  }
}
