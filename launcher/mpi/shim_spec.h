#pragma once
// What nano-run hands every rank's shim (the mpi backend), as data: one JSON argument,
// `nano-run --nano-rank-shim SPEC -- PROGRAM ARGS...`, rather than flags the shim would parse
// again with nano-run's command line. The shim plans its host's ranks and makes their
// environments with the same stages as nano-run (launcher/prepare/launch_setup.h) from it.
#include <map>
#include <string>
#include <vector>

#include "launcher/prepare/launch_types.h"
#include "launcher/prepare/rank_env.h"
#include "launcher/prepare/torchrun_env.h"

namespace nano {

/// The internal first argument that turns nano-run into the mpi backend's rank shim.
inline constexpr const char* kRankShimFlag = "--nano-rank-shim";

struct ShimSpec {
  // ---- what the shim plans and sets, as nano-run would ----
  /// The launch's options as far as they travel: the plan's and the recipe's (the plan's
  /// num_processes is the host's own, OMPI_COMM_WORLD_LOCAL_SIZE), topology_xml and synthetic
  /// (plan against these instead of the host, as nano-run did), front_end (how the shim's errors
  /// name settings) and every setting of core/setting_list.h (heartbeat_timeout...). The rest
  /// keeps its defaults.
  LaunchOptions options;
  /// Variables every shim sets over its host's own environment (launcher/prepare/carried_env.h), so ranks on
  /// other hosts run configured as on the launching one. They include LaunchOptions::extra_env
  /// (--env), applied as the host's own environment is: exported values the recipe respects.
  std::map<std::string, std::string> carried_env;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  std::vector<int> group_starts = {0};  ///< first global rank of every host
  /// The groups (indexes into group_starts) on the host of the process that launched the job
  /// (HostGroup::launch_host): their ranks' NANO_LAUNCH_HOST is "1", every other's "0".
  std::vector<int> launch_host_groups;
  /// The attempt the shims start (job id "" = none, as in a dry run's command): each shim adds
  /// its rank's attempt_variables, as nano-run does for the subprocess backend.
  AttemptIdentity attempt;
  /// Setup::session_dir: the shim checks it is this user's private folder, marks it while its
  /// rank runs, and the host's last shim to end removes it ("" = nothing to remove).
  std::string session_dir;
  /// Setup::job_dir: a one-host job's private folder, its ranks' NANO_JOB_DIR ("" = none: unset).
  std::string job_dir;
  /// Setup::listen_guard: what the shim adds to its rank's environment (launcher/listen_guard/listen_guard.c).
  ListenGuard listen_guard;
  // ---- the link back to nano-run ----
  std::string launcher_host;  ///< "" = no link: the shim execs the program and passes its status on
  int launcher_port = 0;
};

struct Setup;

/// Pure: the spec of the shims of `s`; `carried`: the variables that travel
/// (carried_environment). The link (launcher_host, launcher_port) is the starter's to fill in
/// once it listens. The attempt's secret is left out: it reaches the shims through mpirun's
/// environment (add_job_secret), never through a command line.
ShimSpec shim_spec_for(const Setup& s, const std::map<std::string, std::string>& carried);

/// Pure: the spec as one line of JSON. Strings that are not UTF-8 (an environment may hold any
/// bytes; JSON text cannot) travel as {"hex": "..."}.
std::string encode_shim_spec(const ShimSpec& spec);

/// Pure: the spec back from encode_shim_spec's text; throws UsageError naming what is wrong.
ShimSpec decode_shim_spec(const std::string& text);

}  // namespace nano
