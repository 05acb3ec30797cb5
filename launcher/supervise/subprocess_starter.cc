// The subprocess backend's RankStarter: nano-run forks every rank itself.
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include <nano/error.h>
#include "launcher/prepare/launch_setup.h"
#include "launcher/prepare/torchrun_env.h"
#include "launcher/process/subprocess.h"
#include "launcher/supervise/subprocess_starter.h"

namespace nano {
namespace {

class SubprocessStarter : public RankStarter {
 public:
  SubprocessStarter(const Setup& setup, OwnGroups& groups) : setup_(setup), groups_(groups) {}

  Started start() override {
    Started started;
    bool bind_memory = setup_.topology.numa_nodes.size() > 1;
    for (int r = 0; r < setup_.world_size; ++r) {
      SpawnRequest req;
      req.argv = setup_.argv;
      req.env = environment_strings(setup_.envs[static_cast<size_t>(r)].env);
      req.cpus = setup_.rank_plans[static_cast<size_t>(r)].cpus;
      if (bind_memory) req.numa_nodes = setup_.rank_plans[static_cast<size_t>(r)].numa_nodes;
      Spawned sp;
      try {
        // The rank's TORCHELASTIC_ERROR_FILE goes here; the job's files go with the job.
        if (!setup_.job_id.empty()) make_rank_files_dir(attempt_of(setup_), setup_.rank_offset + r);
        sp = spawn_process(req);
      } catch (const Error&) {
        take_down(started);
        throw;
      }
      for (auto& w : sp.warnings)
        if (std::find(started.warnings.begin(), started.warnings.end(), w) == started.warnings.end())
          started.warnings.push_back(w);
      started.processes.push_back({sp.pid, r, sp.stdout_fd, sp.stderr_fd});
      groups_.add(std::move(sp.group));
    }
    return started;
  }

  void deliver(int sig, const std::vector<pid_t>& running, const Supervisor&) override {
    for (pid_t g : running) groups_.signal(g, sig);
    if (sig != SIGKILL && sig != SIGCONT)
      for (pid_t g : running) groups_.signal(g, SIGCONT);
  }

  void clean_up(const std::vector<pid_t>& started) override {
    for (pid_t g : started) {
      groups_.signal(g, SIGKILL);  // leftovers of a rank's group (daemons)
      groups_.forget(g);
    }
  }

 private:
  // A rank that could not start: the ranks started before it go, and are reaped.
  void take_down(const Started& started) {
    for (const auto& p : started.processes) groups_.signal(p.pid, SIGKILL);
    for (const auto& p : started.processes) {
      int status;
      while (waitpid(p.pid, &status, 0) < 0 && errno == EINTR) {
      }
      close(p.stdout_fd);
      close(p.stderr_fd);
      groups_.forget(p.pid);
    }
  }

  const Setup& setup_;
  OwnGroups& groups_;
};

}  // namespace

std::unique_ptr<RankStarter> make_subprocess_starter(const Setup& setup, OwnGroups& groups) {
  return std::make_unique<SubprocessStarter>(setup, groups);
}

}  // namespace nano
