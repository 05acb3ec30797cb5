#pragma once
// The options of nano::TorchNano and nano::nano() (and, keyword for keyword, of the Python API's
// TorchNano and @nano): values, checked where a launch is prepared.
#include <limits>
#include <string>
#include <vector>

#include <nano/auto_lr.h>
#include <nano/ddp.h>

namespace nano {

/// auto_lr as a bool (`.auto_lr = false`) or full options (`.auto_lr = AutoLrOptions{...}`).
struct AutoLrSetting {
  AutoLrSetting() = default;
  AutoLrSetting(bool enabled) { options.enabled = enabled; }  // NOLINT: implicit on purpose
  AutoLrSetting(AutoLrOptions o) : options(o) {}              // NOLINT
  AutoLrOptions options;
};

/// TorchNanoOptions::num_processes = nano::kAuto: the layout `nano-run --tune` stored for this
/// machine and this program (its command line), or, where none is stored, a tuning of this
/// program first (short trials at each candidate layout, said on stderr), whose winner is stored.
inline constexpr int kAuto = std::numeric_limits<int>::min();

/// Options of nano::TorchNano and nano::nano(). Field order matters for designated
/// initializers: `{.num_processes = 2, .distributed_backend = "mpi", .auto_lr = false}`.
struct TorchNanoOptions {
  int num_processes = 1;  ///< ranks; nano::kAuto = the tuned layout (see kAuto)
  /// One CPU list per rank, e.g. {{0}, {1}}; empty = nano's planner decides.
  std::vector<std::vector<int>> cpu_for_each_process;
  /// "subprocess" (default: re-execute this program per rank) or "mpi" (through mpirun and
  /// nano-run's rank shim; hostfile/hosts for several machines). "fork" is refused.
  std::string distributed_backend = "subprocess";
  /// Linear warm-up of the learning rate to N times (on by default; no effect with N = 1).
  AutoLrSetting auto_lr;
  bool oversubscribe = false;  ///< allow more ranks than cores
  std::string hostfile;        ///< mpi: Open MPI hostfile
  std::string hosts;           ///< mpi: "host:slots,host:slots"
  std::string log_dir;         ///< one log per rank ("" = none)
  int grace_period_ms = 5000;  ///< SIGTERM -> SIGKILL delay when a rank fails
  /// Start the ranks again after one fails, at most this many times (nano-run's
  /// --max-restarts; NANO_RESTART_COUNT tells the ranks which attempt they are).
  int max_restarts = 0;
  int restart_delay_ms = 1000;  ///< wait between a failed attempt and the next (nano-run's --restart-delay)
  /// mpi with hosts: a host not heard from this long counts as lost (a cut link, a dead host),
  /// and ends the attempt (nano-run's --heartbeat-timeout); at least 1000.
  int heartbeat_timeout_ms = 30000;
  /// mpi with hosts: go on without a lost host while this many hosts are left (nano-run's
  /// --min-hosts; 0 = never). Needs max_restarts >= 1.
  int min_hosts = 0;
  int host_lost_after = 2;  ///< with min_hosts: attempts in a row a host is lost in before it leaves
  bool rejoin = false;      ///< with min_hosts: a host that left and answers again is taken back at a restart
  /// When an elastic world changes: "per-rank" (keep each rank's batch) or "global" (keep the
  /// first world's global batch: setup_dataloader's per-rank batch and auto_lr follow it).
  std::string batch_policy = "per-rank";
  /// Record where every rank's time goes (nano-run's --timeline): a Chrome trace-event file
  /// (Perfetto, chrome://tracing) written when the ranks end, FILE.report.json beside it, and
  /// the report on stderr. "" = none.
  std::string timeline;
  DdpOptions ddp;  ///< gradient bucket size etc.
  /// Split each global batch among the ranks by their measured speed (<nano/load_balance.h>),
  /// so a slower core does not hold back the others; gradients are weighted by each rank's
  /// share, which keeps the update that of an equal split for a loss that is a mean over the
  /// batch (libtorch's default reduction). Applies to setup_dataloader() loaders with
  /// workers == 0. false: every rank takes exactly batch_size samples per step.
  bool balance_batches = true;
  /// Checkpoints of the model, the optimizers, the warm-up and every loader made by
  /// setup_dataloader() or passed as a ShardableLoader, in this folder (made when missing;
  /// "" = none). They are taken between steps, when a loader hands out the next batch after a
  /// backward (<nano/auto_checkpoint.h>); when the folder holds one, training resumes from the
  /// newest: finished epochs run empty and the interrupted one goes on where it stopped.
  /// Together with max_restarts a failed rank costs at most the steps since the last one.
  std::string checkpoint_dir;
  int64_t checkpoint_every_steps = 0;  ///< a checkpoint every this many steps (0 = not by steps)
  /// ... and/or at the first step this long after the last one (0 = not by time). With
  /// checkpoint_dir set and neither frequency: every 300 s.
  double checkpoint_every_seconds = 0;
  int checkpoint_keep = 2;  ///< checkpoints kept (the newest)
  /// The checkpoint folder is shared on purpose: used even when it is another user's or others may
  /// write it (CheckpointOptions::shared_folder). Otherwise such a folder is refused in one line.
  bool checkpoint_shared_folder = false;
  /// BigDL-Nano's `precision` (<nano/precision.h>): "32" (default); "64" (the model and the
  /// floating tensors of nano's loaders' batches in float64); "bf16": mixed precision, the
  /// ranks' training code after setup() runs under CPU autocast to bfloat16 (the forward and the
  /// loss), the weights, gradients and optimizer state stay float32. A checkpoint resumes only
  /// in the precision it was written in. bf16 on a CPU without AVX512-BF16 or AMX works, slowly
  /// (one warning line per job).
  std::string precision = "32";
  /// The model's 4-D parameters and buffers, and every 4-D tensor nano's loaders hand out, in
  /// channels-last memory format (what oneDNN's convolutions prefer).
  bool channels_last = false;
  /// The collective library of the ranks' communicator: "auto" (NANO_BACKEND where set, else
  /// MPI under mpirun and Gloo otherwise), "mpi" (needs distributed_backend "mpi" when this
  /// program launches the ranks) or "gloo". Not to be confused with distributed_backend, which
  /// says how the ranks are started.
  std::string communicator = "auto";
};

}  // namespace nano
