#pragma once
// Every decision of a launch, made before anything starts: the backend, the hosts (given, or
// from a Slurm allocation or step), the program, the plan of every rank, each rank's
// environment, the rendezvous address and port, and the job's name for what it leaves in
// /dev/shm. Pure of effects apart from reading the machine, the environment and PATH, so
// --dry-run shows exactly what a launch would do.
#include <string>
#include <vector>

#include "cli/hosts.h"
#include "cli/launcher.h"
#include "cli/rank_env.h"
#include "cli/torchrun_env.h"
#include "env-init/planner.h"
#include "env-init/topology.h"

namespace nano {

/// One group of ranks on one host.
struct HostGroup {
  std::string host;  ///< "" = this machine
  int first_rank = 0;
  int size = 0;
};

/// Every decision of a launch, made before anything starts.
struct Setup {
  LaunchBackend backend = LaunchBackend::kSubprocess;
  std::vector<std::string> argv;  ///< argv[0] resolved
  std::vector<HostSlots> hosts;
  std::vector<HostGroup> groups;
  int world_size = 0;
  Topology topology;
  std::vector<RankPlan> rank_plans;  ///< global rank order
  std::vector<RankEnvironment> envs;
  std::string master_addr;
  int master_port = 0;
  std::vector<std::string> notes;
  std::string warning;  ///< the user_kept warning, printed once
  /// This launch's name for what it leaves in /dev/shm: ranks name nano's shared memory
  /// "nano-<job_id>-...", and on one host Open MPI puts its shared-memory files and session
  /// directory in job_dir, so the launcher (or its guardian) removes them on every way out.
  std::string job_id;
  std::string job_dir;  ///< "" = none (dry run, several hosts)
  /// TORCHELASTIC_RUN_ID: the first attempt's job_id, kept by restarts (a Slurm step's name
  /// when started per node, the same on every node); "" in a dry run.
  std::string run_id;
  int restart_count = 0;  ///< this attempt's: 0, then 1, 2, ...
  /// One node's part of a world started per node (srun): these ranks are rank_offset.. of
  /// world_total, on host group_index; 0 / 0 / -1 otherwise.
  int rank_offset = 0;
  int world_total = 0;
  int group_index = -1;
};

/// Makes every decision of launching `argv` with `o`. `dry`: for --dry-run (no port is picked
/// or checked, no job id, plans for other machines allowed). Throws UsageError naming what is
/// wrong; nothing has started then.
Setup prepare(const LaunchOptions& o, const std::vector<std::string>& argv, bool dry);

/// A restart's world: the same plan, a fresh job (its own files), a fresh rendezvous port unless
/// the user fixed one (the old one may linger in TIME_WAIT), and the restart count; the run id
/// stays.
void renew_for_restart(Setup& s, const LaunchOptions& o, int restarts);

/// The attempt `s` starts, as its ranks see it (cli/torchrun_env.h).
AttemptIdentity attempt_of(const Setup& s, const LaunchOptions& o);

/// nano's Python folder beside this executable (python_folder_for(self_executable())) when it
/// is a folder; "" otherwise.
std::string nano_python_folder();

/// A name for one attempt's files, unique on this host: "<pid>-<6 random hex digits>".
std::string make_job_id();

/// The topology ranks are planned against: o.topology_xml, else o.synthetic, else this machine.
/// The launcher and the mpi backend's rank shim both plan with it, so they agree.
Topology load_topology(const LaunchOptions& o);

/// The nano-run that runs the mpi backend's rank shim (see cli/launcher.h for the search order).
/// Throws UsageError when there is none.
std::string find_shim_executable(const LaunchOptions& o);

/// $name, or "" when unset.
std::string getenv_string(const char* name);

}  // namespace nano
