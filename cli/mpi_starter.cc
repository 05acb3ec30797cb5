// The mpi backend's RankStarter: mpirun on a rank shim per rank, the shims linked back to a
// listening socket of nano-run's and stopped through it (cli/frames.h).
#include "cli/mpi_starter.h"

#include <signal.h>
#include <unistd.h>

#include <random>

#include "cli/carried_env.h"
#include "cli/mpi_command.h"
#include "cli/output.h"
#include "cli/port.h"
#include "cli/rank_starter.h"
#include "cli/subprocess.h"

namespace nano {

void add_one_host_open_mpi_settings(const std::string& job_dir, Environment& env) {
  if (job_dir.empty()) return;
  for (const char* name :
       {"OMPI_MCA_btl_vader_backing_directory", "OMPI_MCA_btl_sm_backing_directory",
        "OMPI_MCA_osc_sm_backing_directory", "OMPI_MCA_orte_tmpdir_base", "PRTE_MCA_prte_tmpdir_base"})
    env.emplace(name, job_dir);
  env.emplace("OMPI_MCA_btl", "^tcp");
}

std::vector<std::string> mpi_command_for(const LaunchOptions& o, const Setup& s, const ShimLink& link) {
  MpiCommandInput in;
  in.mpirun = resolve_program(o.mpirun, getenv_string("PATH"));
  in.num_processes = s.world_size;
  in.hosts = s.hosts;
  in.as_root = geteuid() == 0;
  // Each shim builds its rank's environment from its own (on another host: a login's) with
  // these over it. Through the shims' arguments, not mpirun's -x, which would clash with a
  // user's own Open MPI mca_base_env_list.
  ShimLink with_env = link;
  with_env.env = carried_environment(current_environment(), o.extra_env);
  with_env.attempt = attempt_of(s, o);
  LaunchOptions shim_options = o;
  shim_options.master_addr = s.master_addr;
  shim_options.master_port = s.master_port;
  in.shim.push_back(find_shim_executable(o));
  auto args = shim_arguments(shim_options, with_env);
  in.shim.insert(in.shim.end(), args.begin(), args.end());
  in.program = s.argv;
  return make_mpi_command(in);
}

namespace {

class MpiStarter : public RankStarter {
 public:
  MpiStarter(const LaunchOptions& o, const Setup& s, Guardian& guardian, ShimChannels& shims)
      : o_(o), s_(s), guardian_(guardian), shims_(shims) {}

  Started start() override {
    Started started;
    int port = 0;
    listen_fd_ = listen_on_free_port(!s_.hosts.empty(), port);
    std::random_device rd;
    const std::string token = std::to_string(rd()) + std::to_string(rd());
    shims_.set_token(token);
    ShimLink link;
    link.launcher = (s_.hosts.empty() ? std::string("127.0.0.1") : host_name()) + ":" + std::to_string(port);
    link.token = token;
    for (const auto& g : s_.groups) link.group_starts.push_back(g.first_rank);
    Spawned sp;
    try {
      SpawnRequest req;
      req.argv = mpi_command_for(o_, s_, link);
      Environment env = current_environment();
      add_one_host_open_mpi_settings(s_.job_dir, env);
      req.env = environment_strings(env);
      sp = spawn_process(req);
    } catch (...) {
      close(listen_fd_);
      listen_fd_ = -1;
      throw;
    }
    guardian_.watch_group(sp.pid);
    mpirun_pid_ = sp.pid;
    started.processes.push_back({sp.pid, -1, sp.stdout_fd, sp.stderr_fd});
    started.listen_fd = listen_fd_;
    return started;
  }

  // Asks each rank's shim to deliver `sig` (mpirun is left alone, since its own teardown ignores
  // the grace period); the shim continues a stopped rank itself.
  void deliver(int sig, const std::vector<pid_t>&, const Supervisor& supervisor) override {
    shims_.set_teardown_signal(sig);
    bool all_linked = true;
    for (int r = 0; r < s_.world_size; ++r) {
      if (supervisor.exited(r)) continue;
      if (!shims_.linked(r)) all_linked = false;
      shims_.send(r, encode_frame(FrameType::kSignal, std::to_string(sig)));
    }
    // Shims that never reached us (still starting, or mpirun cannot start them) are mpirun's.
    if (!all_linked && sig == SIGKILL && mpirun_pid_ > 0) killpg(mpirun_pid_, SIGKILL);
  }

  void clean_up(const std::vector<pid_t>&) override {
    close(listen_fd_);
    for (pid_t g : shims_.groups())
      if (g > 0) killpg(g, SIGKILL);  // leftovers of a rank's group (daemons)
    killpg(mpirun_pid_, SIGKILL);
  }

 private:
  const LaunchOptions& o_;
  const Setup& s_;
  Guardian& guardian_;
  ShimChannels& shims_;
  int listen_fd_ = -1;
  pid_t mpirun_pid_ = -1;
};

}  // namespace

std::unique_ptr<RankStarter> make_mpi_starter(const LaunchOptions& o, const Setup& s, Guardian& guardian,
                                              ShimChannels& shims) {
  return std::make_unique<MpiStarter>(o, s, guardian, shims);
}

}  // namespace nano
