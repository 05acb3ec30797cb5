#pragma once
// The Open MPI `mpirun` command line of the mpi backend and the environment mpirun runs in:
// make_mpi_command spells what nano-run decided (pure); mpi_command_for composes it for a
// prepared world (the starter's and --dry-run's).
#include <string>
#include <utility>
#include <vector>

#include "launcher/mpi/shim_spec.h"
#include "launcher/prepare/hosts.h"
#include "launcher/prepare/launch_setup.h"

namespace nano {

/// What goes into the mpirun command.
struct MpiCommandInput {
  std::string mpirun = "mpirun";  ///< path of mpirun
  int num_processes = 1;
  std::vector<HostSlots> hosts;      ///< empty = this machine only
  bool as_root = false;              ///< add --allow-run-as-root (Open MPI refuses root otherwise)
  std::vector<std::string> shim;     ///< per-rank shim command, e.g. {nano-run, --nano-rank-shim, ...}
  std::vector<std::string> program;  ///< the user's program and its arguments
};

/// `mpirun -np N --bind-to none --map-by slot [--oversubscribe] [--allow-run-as-root]
/// [--host h:s,...] SHIM... -- PROGRAM...` (no -x: the environment travels in the shim's
/// spec, so a user's own mca_base_env_list still works). Open MPI's own binding is off because the
/// shim binds every rank from nano's plan; ranks fill hosts in order (slot mapping), which is
/// what `group_starts` assumes; a single-host run allows oversubscription because nano's planner
/// has already decided (and refused, unless asked) too many ranks.
std::vector<std::string> make_mpi_command(const MpiCommandInput& input);

/// The mpirun command that starts `s`'s ranks, each behind a rank shim (this nano-run, found by
/// find_shim_executable) given `spec`.
std::vector<std::string> mpi_command_for(const Setup& s, const ShimSpec& spec);

/// Open MPI settings of a one-host job (`job_dir` set; nothing otherwise), each added to `env`
/// unless the user chose otherwise:
/// - its files go to the job's own directory: the shared-memory transport's segments (btl vader
///   in Open MPI 4, btl sm in 5), the shared windows (osc sm) and the session directory (orte in
///   4, prte in 5). Names unknown to the running version are ignored by it.
/// - one_host_network_settings(): ranks of one host talk through shared memory and listen on
///   no network address (Open MPI 5's TCP transport also prints "Unable to find reachable
///   pairing between local and remote interfaces" once per rank on hosts whose interfaces it
///   cannot pair).
void add_one_host_open_mpi_settings(const std::string& job_dir, Environment& env);

/// Open MPI settings of one rank whose shim made it `rank_dir`, its own /dev/shm folder (nothing
/// when empty): the shared-memory segments the rank itself creates (btl vader in Open MPI 4, sm in
/// 5, and the shared windows of osc sm) go there unless `env` already says where (a one-host job's
/// folder, or the user's choice). The shim removes the folder however the rank ends: a rank killed
/// on a host cut off from nano-run would otherwise leave its segment in /dev/shm. Peers open a
/// segment by the path it was published under, so one folder per rank serves them.
void add_rank_open_mpi_settings(const std::string& rank_dir, Environment& env);

/// The variable through which the attempt's secret reaches every rank shim: Open MPI passes each
/// variable named OMPI_* of mpirun's environment on to the processes it starts on every host,
/// in its launch message rather than on a command line (mpirun's -x would clash with a user's
/// mca_base_env_list).
inline constexpr const char* kShimSecretVariable = "OMPI_NANO_JOB_SECRET";

/// Adds kShimSecretVariable = `secret` to mpirun's environment `env`.
void add_job_secret(const std::string& secret, Environment& env);

/// The listen guard of a job over several hosts (`guard` has a library; nothing otherwise) for
/// Open MPI's own processes: preloaded into mpirun (add_listen_guard), and into the daemons
/// mpirun starts on the other hosts through their launch agent (Open MPI 4's orted, 5's
/// prted), "env LD_PRELOAD=... NANO_LISTEN_GUARD=... orted" before the agent the user chose.
void add_listen_guard_to_open_mpi(const ListenGuard& guard, Environment& env);

/// Open MPI settings of a job over several hosts (`session_dir` set; nothing otherwise): the
/// session directories of mpirun and of every host's daemon go under `session_dir` (orte in
/// Open MPI 4, prte in 5), unless the user chose otherwise.
void add_hosts_open_mpi_settings(const std::string& session_dir, Environment& env);

/// Pure: the Open MPI variables that keep a one-host job off the network: no TCP or libfabric
/// transport in the ranks (pml ob1 over shared memory), and (Open MPI 4.1) loopback only in
/// mpirun's contact address. mpirun itself still listens on every address, in Open MPI 4.1
/// (orte's oob has no setting for the address it binds) and in 5 (prte's oob and PMIx server),
/// which the README says.
std::vector<std::pair<std::string, std::string>> one_host_network_settings();

/// Joins a command for display, quoting words that a shell would split.
std::string shell_join(const std::vector<std::string>& words);

}  // namespace nano
