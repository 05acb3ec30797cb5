#pragma once
// The launcher's value types, at the ground of launcher/: what a launch is asked (LaunchOptions),
// what it ended with (LaunchResult, RankFailure) and what it would do (DryRun). Only the
// planner's and the recipe's types below them; the functions that use them are in
// launcher/launch/launcher.h, the layers that fill them in their own headers.
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/planner.h"
#include "core/recipe.h"
#include "core/setting.h"

namespace nano {

/// How the ranks are started (nano-run's --backend, TorchNano's distributed_backend): nano-run
/// forks them, or Open MPI's mpirun starts them through the rank shim. Not to be confused with
/// the communicator the ranks talk through (CommBackend: mpi or gloo).
enum class LaunchBackend { kAutomatic, kSubprocess, kMpi };

/// Everything a launch needs besides the program itself.
struct LaunchOptions {
  PlanOptions plan;  ///< plan.num_processes 0 = 1 (or the hosts' slots)
  RecipeOptions recipe;
  LaunchBackend backend = LaunchBackend::kAutomatic;  ///< automatic = mpi when mpirun is on PATH
  std::string topology_xml;                           ///< plan against this hwloc XML instead of this machine
  std::string synthetic;                              ///< plan against this hwloc synthetic description
  std::string hostfile;                               ///< mpi backend: Open MPI hostfile
  std::string hosts;                                  ///< mpi backend: "host:slots,host:slots"
  std::string master_addr;                            ///< "" = 127.0.0.1 (or the first host)
  int master_port = 0;                                ///< 0 = a free port picked by the launcher
  std::string log_dir;                                ///< "" = no log files
  std::vector<int> output_ranks;                      ///< empty = every rank's output is shown
  bool tag_output = true;                             ///< prefix lines with "[rank N] "
  std::chrono::milliseconds grace_period{5000};       ///< SIGTERM -> SIGKILL delay at teardown
  /// mpi backend: nano-run and every rank's shim exchange a heartbeat; a rank's shim not heard
  /// from this long counts as lost with its host (exit code kLostHostExitCode), and a shim that
  /// does not hear from nano-run this long ends its rank (a cut link leaves nothing behind).
  std::chrono::milliseconds heartbeat_timeout{30000};
  std::map<std::string, std::string> extra_env;  ///< added to every rank (TorchNano uses it)
  std::string shim_executable;                   ///< mpi backend: program run as the rank shim ("" = find nano-run)
  std::string mpirun = "mpirun";                 ///< mpi backend: mpirun name or path
  /// After a rank fails (non-zero exit or a signal), tear the world down as usual and start it
  /// again, this many times at most: same plan (in an elastic launch, the hosts that answer), a fresh rendezvous port
  /// (unless master_port is fixed), NANO_RESTART_COUNT=1, 2, ... in every rank. An interruption of the launcher
  /// (SIGINT, SIGTERM, SIGHUP) is never restarted. With a log_dir, each attempt's rank logs go
  /// to log_dir/attempt-N/ and summary.log tells every attempt.
  int max_restarts = 0;
  std::chrono::milliseconds restart_delay{1000};  ///< wait between a failed attempt and the next
  /// Elastic across hosts (docs/multihost.md, "Elastic runs"): 0 = off, every restart runs on the
  /// same hosts. N > 0: a host judged lost (host_lost_after) is left out of the next attempts,
  /// which are planned again on the hosts left, as long as N of them are; with fewer the launch
  /// ends with kLostHostExitCode, naming the lost hosts. Needs hosts (or a hostfile, or a Slurm
  /// allocation) and max_restarts >= 1; num_processes, when given, must be all their slots.
  int min_hosts = 0;
  /// A host lost in this many attempts in a row leaves the world: lost = its link closed or fell
  /// silent as the attempt's root cause, or its shims did not start, or it did not answer the
  /// launch agent right after the attempt. At least 1.
  int host_lost_after = 2;
  /// With min_hosts: a host that left the world and answers the launch agent again is taken back
  /// at the next restart (the world grows again); without, a host that left stays out.
  bool rejoin = false;
  /// When an elastic world changes size: "per-rank" keeps each rank's batch (the global batch and
  /// auto_lr's target follow the new N, as BigDL-Nano's scaling does); "global" keeps the global
  /// batch of the first world (each rank's grows or shrinks, rounded up, and auto_lr's target
  /// stays the first world's): its ranks get NANO_BATCH_WORLD_SIZE (core/rank_contract.h).
  std::string batch_policy = "per-rank";
  /// Every rank records its steps' phases and its collectives (runtime/timeline/recorder.h); when the
  /// launch ends, however it ends, they are merged into this Chrome trace-event file, with
  /// FILE.report.json beside it, and the report is told (docs/timeline.md). "" = none.
  std::string timeline;
  /// Who asked: how the launch's own reports (notes, the rank shims' errors) name settings.
  FrontEnd front_end = FrontEnd::kProgram;
  /// Nothing reaches the terminal: rank output and the launcher's own lines go to log_dir's
  /// files only (a tuning trial).
  bool quiet = false;
  /// Asked about every poll interval while the world runs; once it returns true the world is
  /// stopped as at an interruption (SIGTERM, the grace period, SIGKILL), and how the ranks end
  /// then is no failure (LaunchResult::stopped). A tuning trial ends so once it measured enough.
  std::function<bool()> stop_when;
  /// Asked with stop_when (an elastic launch with rejoin sets it while a host that left is
  /// watched): once it returns true, every rank is sent SIGURG, once, and nano's checkpoints stop
  /// the world at the next checkpoint (core/rank_contract.h, kStopAtCheckpoint); a world that
  /// ends so is LaunchResult::stopped_at_checkpoint.
  std::function<bool()> stop_at_checkpoint_when;
  /// Files of the caller's own (an in-program launch's result file) that the job's guardian
  /// removes if the caller dies while a world runs; on any other end the caller removes them.
  std::vector<std::string> caller_files;
};

/// nano-run's exit code when the root cause is a lost host (its shims' links closed or went
/// silent): 255, as ssh's for a lost connection.
inline constexpr int kLostHostExitCode = 255;

/// A host an attempt lost, and why ("its shim's connection to nano-run closed").
struct LostHost {
  std::string host;
  std::string why;
};

/// One world of a launch: from attempt `attempt` (0-based) on, these hosts and ranks.
struct WorldChange {
  int attempt = 0;
  std::vector<std::string> hosts;
  int ranks = 0;
  std::string why;  ///< "" for the first world; "hostC lost (...)", "hostC answers again"
};

/// Why a launch failed: the first rank that failed (the root cause).
struct RankFailure {
  int rank = -1;  ///< -1 when mpirun itself failed before any rank did
  std::string host;
  int exit_code = 0;        ///< the rank's exit code when it exited
  int signal = 0;           ///< the signal that killed it, 0 when it exited
  std::string stderr_tail;  ///< the last lines it wrote to stderr
  std::string lost;         ///< non-empty when its host was lost: why ("no word from its shim for 30 s")
  /// What it raised, from its TORCHELASTIC_ERROR_FILE (torch's `record`): "RuntimeError: boom
  /// (at train.py:12 in main)"; "" = nothing recorded
  std::string raised;
};

/// The outcome of a launch. `exit_code` follows nano-run's contract: 0 all succeeded, the
/// failing rank's code, 128+signal, 130 on Ctrl-C.
struct LaunchResult {
  int exit_code = 0;
  std::optional<RankFailure> failure;  ///< of the last attempt
  int interrupted_by = 0;              ///< the signal the launcher received (SIGINT, SIGTERM, SIGHUP); 0 = none
  int attempts = 1;                    ///< worlds started: 1 + restarts
  bool stopped = false;                ///< LaunchOptions::stop_when ended the world
  /// The ranks stopped at a checkpoint as LaunchOptions::stop_at_checkpoint_when asked (the
  /// root cause exited with kStoppedAtCheckpointExitCode after the ask): a planned end.
  bool stopped_at_checkpoint = false;
  /// The hosts the last attempt lost (its root cause's host, hosts whose shims did not start).
  std::vector<LostHost> lost_hosts;
  /// Every world the launch ran, the first included, when LaunchOptions::min_hosts made it
  /// elastic; empty otherwise.
  std::vector<WorldChange> worlds;
};

/// What a launch would do, without starting anything (`nano-run --dry-run`).
struct DryRunRank {
  int rank = 0;
  std::string host;  ///< "" = this machine
  std::vector<int> cpus;
  std::vector<int> numa_nodes;
  int threads = 1;
  std::map<std::string, std::string> env;  ///< variables the launcher sets for this rank
};
struct DryRun {
  std::string backend;               ///< "subprocess" or "mpi"
  std::vector<std::string> command;  ///< mpi: the mpirun command line
  std::vector<DryRunRank> ranks;
  std::vector<std::string> notes;
};

}  // namespace nano
