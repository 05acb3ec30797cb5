#pragma once
// The shared core of nano's in-program launch (nano::TorchNano and nano::nano): who this
// process is (the caller, a rank it launched, or a rank of an outer nano-run/mpirun world) and
// the per-process session that launches (in the caller) or joins the world, wraps the model and
// reports rank 0's results (in a rank). The options are <nano/torch_nano_options.h>, the value
// rank 0 hands back <nano/train_result.h>.
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

struct Report;  // rank 0's report to the caller (runtime/in_program_report.h)

/// One in-program training of this process. Not copyable.
class Session {
 public:
  /// Decides the role. In a launched rank, checks that this is the training the caller
  /// launched (the n-th one this program reaches); throws UsageError otherwise.
  explicit Session(TorchNanoOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Role role() const { return role_; }
  const TorchNanoOptions& options() const { return options_; }

  // ---- caller ----
  /// Runs the ranks (this program re-executed) and waits; then reads rank 0's report.
  /// Throws UsageError (nothing started) or RankFailedError. Idempotent.
  void launch();
  bool launch_attempted() const { return launch_attempted_; }
  /// Converts `model` as the ranks did theirs (precision "64": float64; channels_last), then
  /// copies rank 0's trained parameters and buffers into it (same names and shapes), and
  /// its optimizers' state (moments, learning rates) into `optimizers` (the same kinds, in the
  /// same order, over the model's parameters).
  void load_trained(torch::nn::Module& model, const std::vector<torch::optim::Optimizer*>& optimizers) const;
  const TrainResult& result() const { return result_; }

  // ---- ranks ----
  /// The connected world (nano::init() on first use).
  World& world();
  /// Converts `model` to the options' precision and memory format, wraps it for gradient
  /// averaging (DDP on the same module object: a plain loss.backward() averages) and applies
  /// auto_lr to `optimizers`: the rate moves at every backward after the first, i.e. before
  /// each optimizer.step() (one backward per step). With precision "bf16" this thread runs
  /// under CPU autocast from here until detach().
  void attach(std::shared_ptr<torch::nn::Module> model, std::vector<torch::optim::Optimizer*> optimizers);
  DistributedDataParallel* ddp() { return ddp_.get(); }
  /// A batch balancer for one loader of `per_rank_batch` samples per rank, wired to this
  /// session's DDP (made by attach(), before or after this call); null when
  /// options().balance_batches is off or the world has one rank.
  std::shared_ptr<BatchBalancer> make_batch_balancer(std::size_t per_rank_batch);
  /// Loader options for this session: `options` with the batch balancer (as above, unless the
  /// options bring one or workers > 0) and the checkpoint hook when checkpoint_dir is set.
  /// Throws UsageError for workers > 0 with checkpoint_dir (positions would run ahead).
  ShardOptions loader_options(ShardOptions options, std::size_t per_rank_batch);
  /// Of the pass in progress of the loader that last handed out a batch: the batches an
  /// interrupted run had trained before this one resumed it (0 when it was not resumed).
  std::size_t resumed_batches() const { return *resumed_batches_; }
  /// Keeps `result` for the caller; the optimizers' state is taken too (see snapshot_optimizers).
  void set_result(TrainResult result);
  /// Copies the optimizers' state for the caller's report, unless no step was taken since the
  /// last copy. Taken when a nano loader ends a pass after steps (the training loop is still
  /// running, so the optimizers still exist), at set_result(), and by finish_launched_rank().
  void snapshot_optimizers();
  /// Launched rank: rank 0 writes its model, its optimizers' state (the last snapshot, when
  /// no step came after it) and result for the caller; every rank tears down (hooks, DDP,
  /// communicator). Returns the rank's exit code for end_launched_rank(): 0, or 1 when the
  /// report could not be written (said on stderr). `optimizers_alive`: the objects given to
  /// attach() still exist (nano(): the caller's arguments), so a last snapshot can be taken;
  /// TorchNano ends its ranks from its destructor, when a train()-local optimizer is gone.
  int finish_launched_rank(bool optimizers_alive);
  /// Removes hooks and DDP (the communicator stays until destruction).
  void detach();

 private:
  Report make_report() const;       // rank 0: what goes back to the caller
  void take_report(Report report);  // caller: what came back

  TorchNanoOptions options_;
  Role role_;
  bool launched_ = false;
  bool launch_attempted_ = false;
  std::optional<World> world_;
  std::shared_ptr<torch::nn::Module> model_;
  std::unique_ptr<DistributedDataParallel> ddp_;
  // ddp_ as the batch balancers see it: cleared when the DDP goes, which they may outlive.
  std::shared_ptr<DistributedDataParallel*> ddp_link_ = std::make_shared<DistributedDataParallel*>(nullptr);
  std::vector<std::unique_ptr<AutoLr>> auto_lrs_;
  std::vector<torch::optim::Optimizer*> optimizers_;
  std::unique_ptr<AutoCheckpoint> checkpoints_;  // with checkpoint_dir, made by world()
  std::shared_ptr<std::size_t> resumed_batches_ = std::make_shared<std::size_t>(0);  // loaders' hooks set it
  Precision precision_ = Precision::kFloat32;
  std::unique_ptr<AutocastScope> autocast_;  // precision "bf16": from attach() to detach()
  struct Hook;
  std::shared_ptr<Hook> hook_;
  TrainResult result_;
  std::vector<std::string> report_names_;  // caller: rank 0's parameter and buffer names
  std::vector<at::Tensor> report_tensors_;
  std::vector<std::shared_ptr<torch::serialize::InputArchive>> report_optimizers_;
  std::vector<std::string> optimizer_snapshot_;  // rank 0's optimizers, serialised
  int64_t snapshot_step_ = -1;                   // the step count they were taken at
  // This session as its loaders' hooks see it: cleared by the destructor (they may outlive it).
  std::shared_ptr<Session*> self_ = std::make_shared<Session*>(this);
};

}  // namespace in_program
}  // namespace nano
