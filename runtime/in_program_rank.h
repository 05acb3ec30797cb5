#pragma once
// A rank's side of an in-program training (nano::TorchNano, nano::nano in a rank): its world,
// the model wrapped for gradient averaging with the warm-up and checkpoints hooked to its
// backward, the loaders' options, and, in a rank the caller launched, rank 0's report back.
// The caller's side is runtime/in_program_caller.h; <nano/in_program.h>'s Session holds the one
// of the two that this process's role needs.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nano/auto_checkpoint.h>
#include <nano/auto_lr.h>
#include <nano/context.h>
#include <nano/ddp.h>
#include <nano/in_program.h>
#include <nano/load_balance.h>
#include <nano/precision.h>
#include <nano/torch_nano_options.h>
#include <nano/train_result.h>

namespace nano {
namespace in_program {

struct Report;

/// One training on this rank. Not copyable.
class RankTraining {
 public:
  /// `options` must outlive this object (the Session owns both); `role` is a rank's.
  RankTraining(const TorchNanoOptions& options, Precision precision, Role role);
  ~RankTraining();
  RankTraining(const RankTraining&) = delete;
  RankTraining& operator=(const RankTraining&) = delete;

  /// Session's contracts, <nano/in_program.h>.
  World& world();
  void attach(std::shared_ptr<torch::nn::Module> model, std::vector<torch::optim::Optimizer*> optimizers);
  ShardOptions loader_options(ShardOptions options, std::size_t per_rank_batch);
  std::size_t resumed_batches() const { return *resumed_batches_; }
  void set_result(TrainResult result);
  const TrainResult& result() const { return result_; }
  int finish_launched_rank(bool optimizers_alive);
  /// Removes hooks and DDP (the communicator stays until destruction).
  void detach();

 private:
  std::shared_ptr<BatchBalancer> make_batch_balancer(std::size_t per_rank_batch);
  // Copies the optimizers' state for the caller's report, unless no step was taken since the
  // last copy: when a nano loader ends a pass after steps (the training loop still runs, so the
  // optimizers still exist), at set_result(), and at finish_launched_rank().
  void snapshot_optimizers();
  Report make_report() const;  // rank 0: what goes back to the caller

  const TorchNanoOptions& options_;
  Precision precision_;
  Role role_;
  std::optional<World> world_;
  std::shared_ptr<torch::nn::Module> model_;
  std::unique_ptr<DistributedDataParallel> ddp_;
  // ddp_ as the batch balancers see it: cleared when the DDP goes, which they may outlive.
  std::shared_ptr<DistributedDataParallel*> ddp_link_ = std::make_shared<DistributedDataParallel*>(nullptr);
  std::vector<std::unique_ptr<AutoLr>> auto_lrs_;
  std::vector<torch::optim::Optimizer*> optimizers_;
  std::unique_ptr<AutoCheckpoint> checkpoints_;  // with checkpoint_dir, made by world()
  std::shared_ptr<std::size_t> resumed_batches_ = std::make_shared<std::size_t>(0);  // loaders' hooks set it
  std::unique_ptr<AutocastScope> autocast_;  // precision "bf16": from attach() to detach()
  struct Hook;
  std::shared_ptr<Hook> hook_;
  TrainResult result_;
  std::vector<std::string> optimizer_snapshot_;  // rank 0's optimizers, serialised
  int64_t snapshot_step_ = -1;                   // the step count they were taken at
  // This object as its loaders' hooks see it: cleared by the destructor (they may outlive it).
  std::shared_ptr<RankTraining*> self_ = std::make_shared<RankTraining*>(this);
};

}  // namespace in_program
}  // namespace nano
