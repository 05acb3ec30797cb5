#include "runtime/in_program_rank.h"

#include <cstdlib>
#include <iostream>
#include <sstream>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/output-archive.h>

#include <nano/batch_policy.h>
#include <nano/checkpoint.h>
#include "core/rank_contract.h"
#include "runtime/in_program_launch.h"
#include "runtime/in_program_report.h"
#include "runtime/options/in_program_options.h"

namespace nano {
namespace in_program {
namespace {

std::string variable(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

}  // namespace

RankTraining::RankTraining(const TorchNanoOptions& options, Precision precision, Role role)
    : options_(options), precision_(precision), role_(role) {}

RankTraining::~RankTraining() {
  *self_ = nullptr;
  detach();
}

struct RankTraining::Hook {
  at::Tensor param;
  unsigned id = 0;
  int64_t backwards = 0;
  std::vector<AutoLr*> auto_lrs;
  AutoCheckpoint* checkpoints = nullptr;
};

World& RankTraining::world() {
  if (!world_) {
    InitOptions init;
    init.backend = communicator_of(options_);
    world_ = nano::init(init);
    if (!options_.checkpoint_dir.empty()) {
      checkpoints_ =
          std::make_unique<AutoCheckpoint>(options_.checkpoint_dir, world_->comm, checkpoint_options_of(options_));
    }
  }
  return *world_;
}

ShardOptions RankTraining::loader_options(ShardOptions options, std::size_t per_rank_batch) {
  if (!options.balancer && options.workers == 0) options.balancer = make_batch_balancer(per_rank_batch);
  world();
  if (checkpoints_) {
    if (options.workers > 0) {
      throw UsageError("nano: checkpoint_dir needs loaders with workers = 0, got workers=" +
                       std::to_string(options.workers) + " (prefetching workers run ahead of the steps taken)");
    }
  }
  options.format = batch_format(precision_, options_.channels_last);
  // A pass that ends after steps: the optimizers are in use, so their state can be copied.
  options.hook = [self = self_, inner = checkpoints_ ? checkpoints_->loader_hook() : SamplerHook(),
                  resumed = resumed_batches_](EpochShardSampler& sampler, SamplerEvent what) {
    if (inner) inner(sampler, what);  // may load the sampler (a resume)
    if (what == SamplerEvent::kBatch) *resumed = sampler.resumed_batches();
    if (what == SamplerEvent::kPassEnd && *self) (*self)->snapshot_optimizers();
  };
  return options;
}

std::shared_ptr<BatchBalancer> RankTraining::make_batch_balancer(std::size_t per_rank_batch) {
  World& w = world();
  if (!options_.balance_batches || per_rank_batch == 0) return nullptr;
  // One rank needs no balancing, but a checkpointed loader keeps the balanced sampler's
  // whole-epoch position, so that a checkpoint resumes with any number of ranks.
  if (w.size() == 1 && options_.checkpoint_dir.empty()) return nullptr;
  // Through the shared link, not a DDP pointer: attach() may come later or replace the DDP,
  // and a loader (the wrapper's arguments) may outlive this session.
  return std::make_shared<BatchBalancer>(w.comm, static_cast<int64_t>(per_rank_batch) * w.size(),
                                         ddp_balance_hooks([link = ddp_link_] { return *link; }));
}

void RankTraining::attach(std::shared_ptr<torch::nn::Module> model, std::vector<torch::optim::Optimizer*> optimizers) {
  detach();
  model_ = std::move(model);
  World& w = world();
  // Before DDP: its broadcast and buckets take the converted tensors.
  format_module(*model_, precision_, options_.channels_last);
  ddp_ = std::make_unique<DistributedDataParallel>(model_, w.comm, options_.ddp);
  if (precision_ == Precision::kBfloat16) {
    // A launched rank's caller has warned already; a restart warned at its first attempt.
    const std::string restart = variable(contract::kRestartCount);
    if (role_ == Role::kExternalRank && w.rank() == 0 && (restart.empty() || restart == "0")) warn_if_slow_bf16();
    autocast_ = std::make_unique<AutocastScope>(true);
  }
  *ddp_link_ = ddp_.get();
  optimizers_ = optimizers;
  const AutoLrOptions lr = options_.auto_lr.options;
  auto hook = std::make_shared<Hook>();
  // With checkpoints also for one rank (a factor of 1): a checkpoint of N ranks then resumes
  // at this world's rate, not at the N-fold one it saved.
  // Its target follows the world the batch was chosen for (an elastic world may keep the first's).
  const int lr_world = batch_world_size(w.size());
  if (lr.enabled && (lr_world > 1 || checkpoints_)) {
    for (auto* opt : optimizers) {
      auto_lrs_.push_back(std::make_unique<AutoLr>(*opt, lr_world, lr));
      hook->auto_lrs.push_back(auto_lrs_.back().get());
    }
  }
  if (checkpoints_) {
    hook->checkpoints = checkpoints_.get();
    // After a restore the warm-up is at the checkpoint's step: the next backward moves it on.
    std::weak_ptr<Hook> weak = hook;
    checkpoints_->track(*model_, optimizers, hook->auto_lrs, precision_name(precision_), [weak](int64_t step) {
      if (auto h = weak.lock()) h->backwards = step;
    });
  }
  // The hook also counts the steps (the optimizers' snapshots and checkpoints need them).
  if (hook->auto_lrs.empty() && !hook->checkpoints && optimizers.empty()) return;
  for (auto& p : model_->parameters(true)) {
    if (!p.requires_grad()) continue;
    hook->param = p;
    break;
  }
  if (!hook->param.defined()) return;
  // The rate for step k must be in place before the k-th optimizer.step(): move it at every
  // backward but the first (backward k precedes step k).
  Hook* raw = hook.get();
  hook->id = hook->param.register_hook([raw](const at::Tensor&) {
    if (raw->backwards++ > 0) {
      for (auto* a : raw->auto_lrs) a->step();
    }
    if (raw->checkpoints) raw->checkpoints->backward();
  });
  hook_ = std::move(hook);
}

void RankTraining::detach() {
  autocast_.reset();
  if (hook_) {
    hook_->param.remove_hook(hook_->id);
    hook_.reset();
  }
  auto_lrs_.clear();
  optimizers_.clear();
  *ddp_link_ = nullptr;
  ddp_.reset();
}

void RankTraining::set_result(TrainResult result) {
  result_ = std::move(result);
  snapshot_optimizers();
}

void RankTraining::snapshot_optimizers() {
  // Only a launched rank 0 reports to a caller; the others never pay for the copy.
  if (role_ != Role::kLaunchedRank || optimizers_.empty() || !hook_ || !world_ || world_->rank() != 0) return;
  if (snapshot_step_ == hook_->backwards) return;
  optimizer_snapshot_.clear();
  for (auto* optimizer : optimizers_) {
    torch::serialize::OutputArchive one;
    save_optimizer(*optimizer, one);
    std::ostringstream bytes;
    one.save_to(bytes);
    optimizer_snapshot_.push_back(bytes.str());
  }
  snapshot_step_ = hook_->backwards;
}

Report RankTraining::make_report() const {
  Report report;
  if (model_) {
    for (auto& p : model_->named_parameters(true)) {
      report.names.push_back("p:" + p.key());
      report.tensors.push_back(p.value().detach());
    }
    for (auto& b : model_->named_buffers(true)) {
      report.names.push_back("b:" + b.key());
      report.tensors.push_back(b.value().detach());
    }
  }
  // The optimizers' state only when it belongs to these weights (no step after the snapshot).
  const bool current = hook_ && snapshot_step_ == hook_->backwards;
  if (!optimizers_.empty() && !current) {
    std::cerr << "nano: warning: the optimizers' state does not come back to the caller: the training did not end "
                 "with a full pass over a nano loader or with set_result()"
              << std::endl;
  }
  if (current) report.optimizer_states = optimizer_snapshot_;
  report.result = result_;
  return report;
}

int RankTraining::finish_launched_rank(bool optimizers_alive) {
  int code = 0;
  try {
    if (optimizers_alive) snapshot_optimizers();
    const int rank = world().rank();
    if (rank == 0) write_report(variable(kResultVar), make_report());
    detach();
    model_.reset();
    checkpoints_.reset();  // finishes a checkpoint still being written; lets go of the communicator
    world_.reset();
  } catch (const std::exception& e) {
    std::cerr << "nano: rank could not report its results: " << e.what() << std::endl;
    code = 1;
  }
  return code;
}

}  // namespace in_program
}  // namespace nano
