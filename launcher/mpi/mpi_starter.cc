// The mpi backend's RankStarter: mpirun on a rank shim per rank, the shims linked back to a
// listening socket of nano-run's and stopped through it (launcher/process/frames.h).
#include "launcher/mpi/mpi_starter.h"

#include <signal.h>
#include <unistd.h>

#include <utility>

#include "core/rank_contract.h"
#include "launcher/mpi/mpi_command.h"
#include "launcher/mpi/shim_spec.h"
#include "launcher/prepare/carried_env.h"
#include "launcher/prepare/port.h"
#include "launcher/process/output.h"
#include "launcher/process/subprocess.h"

namespace nano {

namespace {

class MpiStarter : public RankStarter {
 public:
  MpiStarter(const Setup& setup, OwnGroups& groups, ShimChannels& shims)
      : setup_(setup), groups_(groups), shims_(shims) {}

  Started start() override {
    Started started;
    int port = 0;
    listen_fd_ = listen_on_free_port(setup_.hosts.empty() ? Reach::kThisHost : Reach::kEveryInterface, port);
    // Across hosts it admits the job's hosts only, as the job's other listeners do (mpirun's, the
    // ranks'); its shims also answer the attempt's challenge.
    admit_only_guarded(listen_fd_, setup_.listen_guard);
    shims_.set_secret(setup_.secret);
    if (const auto records = setup_.options.extra_env.find(contract::kTimeline);
        records != setup_.options.extra_env.end())
      shims_.set_timeline_folder(records->second);
    ShimSpec spec = shim_spec_for(setup_, carried_environment(current_environment(), setup_.options.extra_env));
    spec.launcher_host = setup_.hosts.empty() ? std::string("127.0.0.1") : host_name();
    spec.launcher_port = port;
    Spawned sp;
    try {
      SpawnRequest req;
      req.argv = mpi_command_for(setup_, spec);
      Environment env = current_environment();
      add_job_secret(setup_.secret, env);
      for (const auto& [name, value] : carried_secrets(setup_.options.extra_env)) env[name] = value;
      add_listen_guard_to_open_mpi(setup_.listen_guard, env);
      add_one_host_open_mpi_settings(setup_.job_dir, env);
      add_hosts_open_mpi_settings(setup_.session_dir, env);
      req.env = environment_strings(env);
      sp = spawn_process(req);
    } catch (...) {
      close(listen_fd_);
      listen_fd_ = -1;
      throw;
    }
    groups_.add(std::move(sp.group));
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
    for (int r = 0; r < setup_.world_size; ++r) {
      if (supervisor.exited(r)) continue;
      if (!shims_.linked(r)) all_linked = false;
      shims_.send(r, encode_frame(FrameType::kSignal, std::to_string(sig)));
    }
    // Shims that never reached us (still starting, or mpirun cannot start them) are mpirun's.
    if (!all_linked && sig == SIGKILL && mpirun_pid_ > 0) groups_.signal(mpirun_pid_, SIGKILL);
  }

  void clean_up(const std::vector<pid_t>&) override {
    close(listen_fd_);
    for (pid_t g : shims_.groups()) {
      if (g <= 0) continue;
      groups_.signal(g, SIGKILL);  // leftovers of a rank's group (daemons)
      groups_.forget(g);
    }
    groups_.signal(mpirun_pid_, SIGKILL);
    groups_.forget(mpirun_pid_);
  }

 private:
  const Setup& setup_;
  OwnGroups& groups_;
  ShimChannels& shims_;
  int listen_fd_ = -1;
  pid_t mpirun_pid_ = -1;
};

}  // namespace

std::unique_ptr<RankStarter> make_mpi_starter(const Setup& setup, OwnGroups& groups, ShimChannels& shims) {
  return std::make_unique<MpiStarter>(setup, groups, shims);
}

}  // namespace nano
