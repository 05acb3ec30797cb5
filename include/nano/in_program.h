#pragma once
// The shared core of nano's in-program launch (nano::TorchNano and nano::nano): who this
// process is (the caller, a rank it launched, or a rank of an outer nano-run/mpirun world) and
// the per-process session that gives each step to the side of that role: the caller's launch,
// which takes back rank 0's report (runtime/in_program_caller.h), or the rank's training, which
// joins the world, wraps the model and reports (runtime/in_program_rank.h). The options are
// <nano/torch_nano_options.h>, the value rank 0 hands back <nano/train_result.h>.
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include <nano/auto_checkpoint.h>
#include <nano/auto_lr.h>
#include <nano/context.h>
#include <nano/ddp.h>
#include <nano/in_program_error.h>
#include <nano/load_balance.h>
#include <nano/precision.h>
#include <nano/torch_nano_options.h>
#include <nano/train_result.h>

namespace nano {

/// Pure: the checkpoint settings of `options` (the 300 s default applied); throws UsageError
/// naming the setting for a negative frequency or checkpoint_keep < 1.
CheckpointOptions checkpoint_options_of(const TorchNanoOptions& options);

namespace in_program {

/// Who this process is in an in-program launch.
enum class Role {
  kCaller,        ///< a plain process: launches the ranks and waits
  kLaunchedRank,  ///< a rank re-executed by a caller (NANO_IN_PROGRAM set)
  kExternalRank,  ///< a rank of a world started by nano-run, mpirun or torchrun: joins it
};

/// Pure: the role from the environment (rank variables and the in-program marker).
Role role_from_env(const Environment& env);

/// Ends a launched rank's process with `exit_code`, stdout and stderr flushed. A launched rank
/// is this program started again to run one training function; once that function is done the
/// rank must not go on into the code after it (that is the caller's), so its process ends here.
/// The one place where nano's library ends a process: TorchNano's destructor and nano()'s
/// wrapper call it, in launched ranks only (nano-run's and nano-init's mains aside).
[[noreturn]] void end_launched_rank(int exit_code);

class CallerLaunch;  // the caller's launch and rank 0's report of it (runtime/in_program_caller.h)
class RankTraining;  // a rank's world, model and hooks (runtime/in_program_rank.h)

/// One in-program training of this process: decides its role, and gives each step of TorchNano
/// and nano() to the side that role has, the caller's launch or the rank's training. Not
/// copyable.
class Session {
 public:
  /// Decides the role. In a launched rank, checks that this is the training the caller
  /// launched (the n-th one this program reaches); throws UsageError otherwise. Checks the
  /// options every role applies (precision, communicator): UsageError naming the field.
  explicit Session(TorchNanoOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Role role() const { return role_; }
  const TorchNanoOptions& options() const { return options_; }

  // ---- caller (nothing, or nano::Error, in a rank) ----
  /// Runs the ranks (this program re-executed) and waits; then reads rank 0's report.
  /// Throws UsageError (nothing started) or RankFailedError. Idempotent; nothing in a rank.
  void launch();
  bool launch_attempted() const;
  /// Converts `model` as the ranks did theirs (precision "64": float64; channels_last), then
  /// copies rank 0's trained parameters and buffers into it (same names and shapes), and
  /// its optimizers' state (moments, learning rates) into `optimizers` (the same kinds, in the
  /// same order, over the model's parameters).
  void load_trained(torch::nn::Module& model, const std::vector<torch::optim::Optimizer*>& optimizers) const;
  /// The caller: what rank 0 set; a rank: what it set itself.
  const TrainResult& result() const;

  // ---- ranks (nano::Error in the caller) ----
  /// The connected world (nano::init() on first use).
  World& world();
  /// Converts `model` to the options' precision and memory format, wraps it for gradient
  /// averaging (DDP on the same module object: a plain loss.backward() averages) and applies
  /// auto_lr to `optimizers`: the rate moves at every backward after the first, i.e. before
  /// each optimizer.step() (one backward per step). With precision "bf16" this thread runs
  /// under CPU autocast from here until the session ends or the next attach().
  void attach(std::shared_ptr<torch::nn::Module> model, std::vector<torch::optim::Optimizer*> optimizers);
  /// Loader options for this session: `options` with a batch balancer for `per_rank_batch`
  /// samples per rank (with options().balance_batches, workers == 0 and more than one rank,
  /// unless the options bring one) and the checkpoint hook when checkpoint_dir is set.
  /// Throws UsageError for workers > 0 with checkpoint_dir (positions would run ahead).
  ShardOptions loader_options(ShardOptions options, std::size_t per_rank_batch);
  /// Of the pass in progress of the loader that last handed out a batch: the batches an
  /// interrupted run had trained before this one resumed it (0 when it was not resumed).
  std::size_t resumed_batches() const;
  /// Keeps `result` for the caller; the optimizers' state is copied with it, and again when a
  /// nano loader ends a pass after steps.
  void set_result(TrainResult result);
  /// Launched rank: rank 0 writes its model, its optimizers' state (the last copy, when no
  /// step came after it) and result for the caller; every rank tears down (hooks, DDP,
  /// communicator). Returns the rank's exit code for end_launched_rank(): 0, or 1 when the
  /// report could not be written (said on stderr). `optimizers_alive`: the objects given to
  /// attach() still exist (nano(): the caller's arguments), so a last copy can be taken;
  /// TorchNano ends its ranks from its destructor, when a train()-local optimizer is gone.
  int finish_launched_rank(bool optimizers_alive);

 private:
  CallerLaunch& caller() const;
  RankTraining& rank() const;

  TorchNanoOptions options_;  // before the sides, which refer to it
  Role role_;
  std::unique_ptr<CallerLaunch> caller_;  // role kCaller
  std::unique_ptr<RankTraining> rank_;    // the ranks' roles
};

}  // namespace in_program
}  // namespace nano
