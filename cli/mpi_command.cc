#include "cli/mpi_command.h"

namespace nano {

std::vector<std::string> make_mpi_command(const MpiCommandInput& input) {
  std::vector<std::string> cmd = {input.mpirun, "-np", std::to_string(input.num_processes), "--bind-to", "none",
                                  "--map-by",   "slot"};
  if (input.hosts.empty()) cmd.push_back("--oversubscribe");
  if (input.as_root) cmd.push_back("--allow-run-as-root");
  if (!input.hosts.empty()) {
    cmd.push_back("--host");
    cmd.push_back(format_hosts(input.hosts));
  }
  cmd.insert(cmd.end(), input.shim.begin(), input.shim.end());
  cmd.push_back("--");
  cmd.insert(cmd.end(), input.program.begin(), input.program.end());
  return cmd;
}

std::string shell_join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) {
    if (!out.empty()) out += ' ';
    bool plain = !w.empty();
    for (char c : w) {
      bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                std::string("-_./:=,+@%").find(c) != std::string::npos;
      if (!ok) plain = false;
    }
    if (plain) {
      out += w;
    } else {
      out += '\'';
      for (char c : w) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
      out += '\'';
    }
  }
  return out;
}

}  // namespace nano
