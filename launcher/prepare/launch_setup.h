#pragma once
// Every decision of a launch, made before anything starts, in named stages, as torchrun's
// elastic agent separates its spec from its worker group:
//   check_launch_options   the options on their own (each check once, here)
//   choose_backend         subprocess or mpi
//   resolve_hosts          given, a hostfile's, or a Slurm allocation's
//   plan_world             every rank's CPUs, group by group (plan_host_ranks per host)
//   choose_rendezvous      MASTER_ADDR and how MASTER_PORT is chosen
//   make_rank_environment  (launcher/prepare/rank_env.h) each rank's variables, shared with the rank shim
//   stamp_attempt          the attempt's job id, its files and its variables
// Each stage is pure and table-tested (tests/launcher/prepare/launch_setup_test.cc); prepare() is the thin
// shell that feeds them what it reads (PATH, the environment, the machine) and carries out
// their few effects (resolving a name, checking or picking a port).
#include <optional>
#include <string>
#include <vector>

#include "core/planner.h"
#include "core/topology.h"
#include "launcher/prepare/hosts.h"
#include "launcher/prepare/launch_types.h"
#include "launcher/prepare/rank_env.h"
#include "launcher/prepare/slurm.h"
#include "launcher/prepare/torchrun_env.h"

namespace nano {

/// One group of ranks on one host.
struct HostGroup {
  std::string host;  ///< "" = this machine
  int first_rank = 0;
  int size = 0;
  /// The process that launches the job runs on this group's host: its ranks' NANO_LAUNCH_HOST
  /// is "1" (rank_contract.h). Decided by plan_world, never by what a rank finds on its host.
  bool launch_host = false;
};

/// How the rendezvous port is decided.
enum class PortChoice {
  kGiven,    ///< o.master_port, checked free where rank 0 listens (when that is this host)
  kDerived,  ///< a Slurm node part's port, the same on every node; node 0 checks it
  kPicked,   ///< a free port picked here
};

/// What prepare() prepares for: a launch (a port is checked or picked, the attempt is stamped)
/// or --dry-run (nothing is bound, no job id, plans for other machines allowed).
enum class Purpose { kLaunch, kDryRun };

/// Every decision of a launch, made once before anything starts (prepare()), with the options
/// it was made from: the dry run reads it, launch() starts it, and a restart renews only what
/// changes (renew_for_restart()).
struct Setup {
  LaunchOptions options;  ///< what the launch was prepared from
  Purpose purpose = Purpose::kDryRun;
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
  PortChoice port_choice = PortChoice::kPicked;  ///< how master_port came about (a restart keeps all but a picked one)
  std::vector<std::string> notes;
  std::string warning;  ///< the user_kept warning, printed once
  /// This launch's name for what it leaves in /dev/shm: ranks name nano's shared memory
  /// "nano-<job_id>-...", and a one-host job has its private folder job_dir (job_dir_of), made
  /// 0700 by the launcher (one made by someone else first is refused), named in every rank's
  /// NANO_JOB_DIR: the runtime's rendezvous store lives there, and Open MPI puts its
  /// shared-memory files and session directory there when it runs the job. The launcher (or its
  /// guardian) removes it on every way out.
  std::string job_id;
  std::string job_dir;  ///< "" = none (dry run, several hosts)
  /// Several hosts (mpi): Open MPI's session directories on every host go under this folder
  /// (hosts_session_dir_of), which nano-run removes on its host and each host's last shim on
  /// its own. "" = none (one host, dry run, subprocess).
  std::string session_dir;
  /// TORCHELASTIC_RUN_ID: the first attempt's job_id, kept by restarts (a Slurm step's name
  /// when started per node, the same on every node); "" in a dry run.
  std::string run_id;
  /// The attempt's secret (core/job_secret.h), in every rank's environment; the shims prove they
  /// know it, and so do the ranks to the job store of a job over several hosts. "" in a dry run.
  std::string secret;
  int restart_count = 0;  ///< this attempt's: 0, then 1, 2, ...
  /// A job over several hosts (or a Slurm node part), or of the mpi backend: every listener of
  /// its processes (mpirun, Open MPI's daemons, the ranks) admits only its hosts
  /// (launcher/listen_guard/listen_guard.c); on one host, this host's own addresses. None for the subprocess
  /// backend on one host, where nothing listens off loopback, and in a dry run.
  ListenGuard listen_guard;
  /// One node's part of a world started per node (srun): these ranks are rank_offset.. of
  /// world_total, on host group_index; 0 / 0 / -1 otherwise.
  int rank_offset = 0;
  int world_total = 0;
  int group_index = -1;
};

// ---- the stages ----

/// Pure: the checks of `o` that need nothing but `o` (the plan's are make_plan's). Throws
/// SettingError: num_processes, max_restarts, grace_period or restart_delay below 0, a heartbeat_timeout
/// under 1 s, hosts with hostfile, topology with synthetic, min_hosts below 0 or without max_restarts,
/// host_lost_after below 1, rejoin without min_hosts.
void check_launch_options(const LaunchOptions& o);

/// Where the hosts come from when none are named: inside a Slurm allocation of several nodes
/// (salloc, sbatch), its nodes; started once per node by srun, this node's part of the world.
struct SlurmContext {
  std::optional<SlurmNodePart> node_part;
  std::optional<std::vector<HostSlots>> allocation;  ///< only with 2 nodes or more
};

/// Pure: the Slurm context of a launch of `o` in environment `env` (none when hosts are named,
/// no allocation for the subprocess backend).
SlurmContext slurm_context_of(const LaunchOptions& o, const Environment& env);

/// Pure: the backend that starts the ranks. `o.backend`: the option; `have_mpirun`: mpirun found
/// on PATH. Unasked, one host gets subprocess (nothing listens on the network) and several hosts
/// mpi; a node part always runs its own ranks (subprocess). Throws SettingError for hosts
/// without mpi, mpi without mpirun.
LaunchBackend choose_backend(const LaunchOptions& o, const SlurmContext& slurm, bool have_mpirun);

/// The hosts of the launch in Open MPI's order (this host first when it is one of them): from
/// o.hosts, o.hostfile (read here) or the allocation; empty for one machine.
std::vector<HostSlots> resolve_hosts(const LaunchOptions& o, const SlurmContext& slurm,
                                     std::vector<std::string>& notes);

/// Pure: the checks of an elastic launch (o.min_hosts > 0) against its `hosts`: several hosts, at
/// least min_hosts of them, and num_processes unset or all their slots. Throws SettingError.
void check_elastic_hosts(const LaunchOptions& o, const std::vector<HostSlots>& hosts);

/// Pure: the CPUs of `ranks` ranks of one host (`plan` with num_processes = ranks). The same
/// stage for nano-run's plan of every host and for a rank shim's plan of its own.
Plan plan_host_ranks(const Topology& topology, PlanOptions plan, int ranks);

/// The world's ranks: the groups, their plans in global rank order and their identity numbers.
struct WorldPlan {
  std::vector<HostGroup> groups;
  std::vector<RankPlan> rank_plans;
  int world_size = 0;  ///< ranks this launch starts
  int rank_offset = 0;
  int world_total = 0;   ///< all nodes' ranks, when a Slurm node part; 0 otherwise
  int group_index = -1;  ///< this node's index when a Slurm node part
  int group_count = 1;   ///< hosts (or Slurm nodes) of the whole world
  std::vector<std::string> notes;
};

/// Pure: plans the world. One machine: the plan of `o.plan`. A Slurm node part: its equal part.
/// Hosts: each host's slots in order, each planned (here against this machine's `topology`; the
/// shims plan against their own). `this_host`: this machine's name (host_name()), as
/// resolve_hosts matched it: the group of that host (or "localhost", "127.0.0.1") is the
/// launching host's, as is the one group of one machine or of a node part. Throws SettingError
/// for a rank count the hosts or nodes do not take, or an output rank outside the world.
WorldPlan plan_world(const Topology& topology, const LaunchOptions& o, const std::vector<HostSlots>& hosts,
                     const SlurmContext& slurm, const std::string& this_host);

/// Pure: whether a group on `host` (a HostGroup's: "" = this machine) runs on the host named
/// `this_host`, where the launching process runs.
bool is_launch_host(const std::string& host, const std::string& this_host);

/// The rendezvous: MASTER_ADDR and how MASTER_PORT comes about.
struct Rendezvous {
  std::string addr;
  int port = 0;  ///< kGiven and kDerived: the port; kPicked: 0 until picked
  PortChoice choice = PortChoice::kPicked;
  bool check_here = false;  ///< rank 0 listens on this host, so the port is checked here
};

/// Pure: rank 0's address (o.master_addr, the Slurm step's first node, the first host, or
/// 127.0.0.1) and how the port is chosen.
Rendezvous choose_rendezvous(const LaunchOptions& o, const std::vector<HostSlots>& hosts, const SlurmContext& slurm);

/// What rank environments are made of besides each rank's identity and plan.
struct EnvironmentInputs {
  const RecipeOptions* recipe = nullptr;
  const Environment* current = nullptr;
  LibraryFinder finder;
  const std::map<std::string, std::string>* extra_env = nullptr;
  std::string python_folder;  ///< nano's Python folder ("" = none)
  ListenGuard listen_guard;   ///< added to every rank's environment (none: no library)
};

/// Pure: the environment of every rank of `world`, in global rank order, from `inputs` and the
/// rendezvous, with NANO_LAUNCH_HOST from its group (HostGroup::launch_host) and no NANO_JOB_DIR
/// (an attempt's: stamp_attempt).
std::vector<RankEnvironment> make_rank_environments(const WorldPlan& world, const Rendezvous& rendezvous,
                                                    const EnvironmentInputs& inputs);

/// Pure: whether a launch of `s` needs the listen guard: its ranks are on several hosts, or
/// mpirun starts them (it listens on every address, even on one host).
bool needs_listen_guard(const Setup& s);

/// Pure: stamps attempt `attempt` on `s`: its job id, run id, secret and restart count; every rank's
/// attempt variables (NANO_JOB_ID, ..., launcher/prepare/torchrun_env.h) and MASTER_PORT; on one host the
/// job's private folder (job_dir, each rank's NANO_JOB_DIR, unset elsewhere), across hosts with
/// the mpi backend Open MPI's session folder (session_dir).
void stamp_attempt(Setup& s, const AttemptIdentity& attempt);

// ---- the shell ----

/// Makes every decision of launching `argv` with `o` by running the stages. Throws UsageError
/// (SettingError where one setting is wrong); nothing has started then.
Setup prepare(const LaunchOptions& o, const std::vector<std::string>& argv, Purpose purpose);

/// A restart's world: the same plan, a fresh job (its own files and secret), a fresh rendezvous port when
/// the first was picked (the old one may linger in TIME_WAIT; a given or Slurm-derived port
/// stays), and the restart count; the run id stays.
void renew_for_restart(Setup& s, int restarts);

/// An elastic restart's world on `hosts` (some of s's hosts, or all of them again): everything
/// planned again for them as prepare() would (ranks, cores, rendezvous, listen guard), a fresh
/// job, restart count `restarts`; the run id and the options but the hosts stay. Throws
/// UsageError as prepare() does.
Setup prepare_on_hosts(const Setup& s, const std::vector<HostSlots>& hosts, int restarts);

/// The attempt `s` starts, as its ranks see it (launcher/prepare/torchrun_env.h).
AttemptIdentity attempt_of(const Setup& s);

/// nano's Python folder beside this executable (python_folder_for(self_executable())) when it
/// is a folder; "" otherwise.
std::string nano_python_folder();

/// The listen guard of a launch over `hosts` (the Slurm step's nodes for a node part): the
/// library beside `nano_run` (the nano-run that runs the shims, or this one) and
/// admitted_sources() of this host's addresses and the hosts'. NANO_LISTEN_GUARD exported by the
/// user replaces the sources ("off": no guard). Throws UsageError when the library is missing,
/// naming where it was looked for.
ListenGuard listen_guard_for(const std::vector<std::string>& hosts, const Environment& current,
                             const std::string& nano_run);

/// The topology ranks are planned against: o.topology_xml, else o.synthetic, else this machine.
/// The launcher and the mpi backend's rank shim both plan with it, so they agree.
Topology load_topology(const std::string& topology_xml, const std::string& synthetic);

/// The nano-run that runs the mpi backend's rank shim (see launcher/launch/launcher.h for the search order).
/// Throws UsageError when there is none.
std::string find_shim_executable(const LaunchOptions& o);

/// $name, or "" when unset.
std::string getenv_string(const char* name);

}  // namespace nano
