#include "launcher/mpi/mpi_command.h"

#include <unistd.h>

#include "launcher/process/subprocess.h"
#include "launcher/source_filter/source_filter.h"

namespace nano {

std::vector<std::string> mpi_command_for(const Setup& s, const ShimSpec& spec) {
  MpiCommandInput in;
  in.mpirun = resolve_program(s.options.mpirun, getenv_string("PATH"));
  in.num_processes = s.world_size;
  in.hosts = s.hosts;
  in.as_root = geteuid() == 0;
  // Each shim builds its rank's environment from its own (on another host: a login's) with the
  // spec's carried variables over it. Through the spec, not mpirun's -x, which would clash with
  // a user's own Open MPI mca_base_env_list.
  in.shim = {find_shim_executable(s.options), kRankShimFlag, encode_shim_spec(spec)};
  in.program = s.argv;
  return make_mpi_command(in);
}

void add_job_secret(const std::string& secret, Environment& env) { env[kShimSecretVariable] = secret; }

void add_listen_guard_to_open_mpi(const ListenGuard& guard, Environment& env) {
  if (guard.library.empty()) return;
  add_listen_guard(env, guard);
  const std::string wrapper =
      "env LD_PRELOAD=" + guard.library + " " + NANO_LISTEN_GUARD_VARIABLE + "=" + listen_guard_value(guard) + " ";
  for (const auto& [variable, daemon] : {std::pair<const char*, const char*>{"OMPI_MCA_orte_launch_agent", "orted"},
                                         {"PRTE_MCA_prte_launch_agent", "prted"}}) {
    auto it = env.find(variable);
    env[variable] = wrapper + (it == env.end() || it->second.empty() ? daemon : it->second);
  }
}

void add_one_host_open_mpi_settings(const std::string& job_dir, Environment& env) {
  if (job_dir.empty()) return;
  for (const char* name :
       {"OMPI_MCA_btl_vader_backing_directory", "OMPI_MCA_btl_sm_backing_directory",
        "OMPI_MCA_osc_sm_backing_directory", "OMPI_MCA_orte_tmpdir_base", "PRTE_MCA_prte_tmpdir_base"})
    env.emplace(name, job_dir);
  for (const auto& [name, value] : one_host_network_settings()) env.emplace(name, value);
}

void add_rank_open_mpi_settings(const std::string& rank_dir, Environment& env) {
  if (rank_dir.empty()) return;
  for (const char* name : {"OMPI_MCA_btl_vader_backing_directory", "OMPI_MCA_btl_sm_backing_directory",
                           "OMPI_MCA_osc_sm_backing_directory"})
    env.emplace(name, rank_dir);
}

void add_hosts_open_mpi_settings(const std::string& session_dir, Environment& env) {
  if (session_dir.empty()) return;
  // mpirun hands these to the daemons it starts on the other hosts.
  env.emplace("OMPI_MCA_orte_tmpdir_base", session_dir);
  env.emplace("PRTE_MCA_prte_tmpdir_base", session_dir);
}

std::vector<std::pair<std::string, std::string>> one_host_network_settings() {
  return {
      // Shared memory between the ranks: neither TCP nor libfabric's btl (which listens on the
      // host's external address in every rank), nor the pmls over libfabric or UCX.
      {"OMPI_MCA_btl", "^tcp,ofi"},
      {"OMPI_MCA_pml", "ob1"},
      // Open MPI 4.1's daemon channel: only loopback addresses in its contact URI. (Open MPI
      // 5's prte refuses loopback alone: "No network interfaces were found for out-of-band
      // communications".)
      {"OMPI_MCA_oob_tcp_if_include", "lo"},
  };
}

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
