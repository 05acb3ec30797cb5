#include <nano/in_program.h>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>

#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>
#include <torch/utils.h>

#include "core/rank_contract.h"
#include "runtime/folder_claim.h"
#include "runtime/in_program_launch.h"
#include "runtime/in_program_options.h"
#include "runtime/in_program_report.h"
#include "runtime/step_report.h"  // in_tuning_trial
#include "runtime/training_index.h"

namespace nano {
namespace in_program {
namespace {

std::string env_or_empty(const Environment& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

std::string make_report_path() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/nano-in-program-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  int fd = mkstemp(buf.data());
  if (fd < 0) throw Error("nano: cannot create a result file like " + templ);
  close(fd);
  return std::string(buf.data());
}

// Once per job: the caller (in-program launch) or rank 0 of an outer world's first attempt.
void warn_if_slow_bf16() {
  if (cpu_has_bf16()) return;
  std::cerr << "nano: warning: precision \"bf16\" on a CPU without AVX512-BF16 or AMX: bfloat16 is emulated in "
               "float32 instructions here, and training is usually slower than with \"32\""
            << std::endl;
}

}  // namespace

Role role_from_env(const Environment& env) {
  const bool ranked = env.count("RANK") || env.count("OMPI_COMM_WORLD_RANK");
  if (!ranked) return Role::kCaller;
  return env.count(kMarkerVar) ? Role::kLaunchedRank : Role::kExternalRank;
}

struct Session::Hook {
  at::Tensor param;
  unsigned id = 0;
  int64_t backwards = 0;
  std::vector<AutoLr*> auto_lrs;
  AutoCheckpoint* checkpoints = nullptr;
};

Session::Session(TorchNanoOptions options) : options_(std::move(options)), role_(role_from_env(current_environment())) {
  // The training settings every role applies: checked here, before anything starts.
  try {
    precision_ = precision_of(options_);
    communicator_of(options_);
  } catch (const UsageError& e) {
    throw UsageError(program_message(e));
  }
  const int index = reach_next_training();
  if (role_ == Role::kLaunchedRank) {
    const std::string marker = env_or_empty(current_environment(), kMarkerVar);
    if (marker != std::to_string(index)) {
      throw UsageError("nano: this rank was launched for in-program training #" + marker +
                       " but the re-executed program reached training #" + std::to_string(index) +
                       " first; the program must reach the same training call on every run");
    }
  }
}

Session::~Session() {
  *self_ = nullptr;
  detach();
}

void Session::launch() {
  if (launched_ || role_ != Role::kCaller) return;
  launch_attempted_ = true;
  // Every check before anything of the user's is created (the checkpoint folder, its claim):
  // the options and the plan, prepared once for the launch. The launch path's errors are worded
  // here, once, in TorchNanoOptions' names.
  LaunchOptions launch;
  try {
    launch = launch_options_of(options_);
    if (!options_.checkpoint_dir.empty()) checkpoint_options_of(options_);
  } catch (const UsageError& e) {
    throw UsageError(program_message(e));
  }
  // The caller owns the checkpoint folder for the whole launch, restarts included; its ranks
  // carry its job identity, so rank 0 finds the claim its own.
  if (!options_.checkpoint_dir.empty()) launch.extra_env[contract::kCheckpointJob] = checkpoint_job_id();
  // Rank 0's result file is named in every rank's environment, so it exists before the launch is
  // prepared; it goes however the launch ends, and with the job if the caller is SIGKILLed.
  const std::string path = make_report_path();
  launch.extra_env[kMarkerVar] = std::to_string(trainings_reached());
  launch.extra_env[kResultVar] = path;
  launch.caller_files.push_back(path);
  try {
    std::optional<PreparedLaunch> prepared;
    try {
      prepared.emplace(prepare_self(launch, options_.num_processes == kAuto));
    } catch (const UsageError& e) {
      throw UsageError(program_message(e));
    }
    std::unique_ptr<FolderClaim> claim;
    if (!options_.checkpoint_dir.empty()) {
      prepare_checkpoint_dir(options_.checkpoint_dir);
      if (!in_tuning_trial()) claim = std::make_unique<FolderClaim>(options_.checkpoint_dir);
    }
    if (precision_ == Precision::kBfloat16) warn_if_slow_bf16();
    std::cout.flush();
    std::fflush(nullptr);
    try {
      launch_self(std::move(*prepared));
    } catch (const UsageError& e) {
      throw UsageError(program_message(e));
    }
    take_report(read_report(path));
  } catch (...) {
    ::unlink(path.c_str());
    throw;
  }
  ::unlink(path.c_str());
  launched_ = true;
}

void Session::load_trained(torch::nn::Module& model, const std::vector<torch::optim::Optimizer*>& optimizers) const {
  if (report_names_.empty()) {
    throw Error("nano: rank 0 reported no model (its training never called setup() with one)");
  }
  std::map<std::string, at::Tensor> mine;
  for (auto& p : model.named_parameters(true)) mine["p:" + p.key()] = p.value();
  for (auto& b : model.named_buffers(true)) mine["b:" + b.key()] = b.value();
  if (mine.size() != report_names_.size()) {
    throw Error("nano: rank 0's model has " + std::to_string(report_names_.size()) +
                " parameters and buffers, the caller's " + std::to_string(mine.size()));
  }
  // The ranks' dtype and layout, so that the optimizers' state loaded below fits it.
  format_module(model, precision_, options_.channels_last);
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < report_names_.size(); ++i) {
    auto it = mine.find(report_names_[i]);
    if (it == mine.end()) {
      throw Error("nano: the caller's model has no " + report_names_[i].substr(2) + " (rank 0's model has)");
    }
    if (!it->second.sizes().equals(report_tensors_[i].sizes())) {
      throw Error("nano: " + report_names_[i].substr(2) + " has another shape in the caller's model");
    }
    it->second.copy_(report_tensors_[i]);
  }
  if (report_optimizers_.empty()) return;  // rank 0 said why (a warning line)
  if (report_optimizers_.size() != optimizers.size()) {
    throw Error("nano: rank 0 trained " + std::to_string(report_optimizers_.size()) + " optimizers, the caller has " +
                std::to_string(optimizers.size()));
  }
  for (std::size_t i = 0; i < optimizers.size(); ++i) load_optimizer(*optimizers[i], *report_optimizers_[i]);
}

World& Session::world() {
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

ShardOptions Session::loader_options(ShardOptions options, std::size_t per_rank_batch) {
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

std::shared_ptr<BatchBalancer> Session::make_batch_balancer(std::size_t per_rank_batch) {
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

void Session::attach(std::shared_ptr<torch::nn::Module> model, std::vector<torch::optim::Optimizer*> optimizers) {
  detach();
  model_ = std::move(model);
  World& w = world();
  // Before DDP: its broadcast and buckets take the converted tensors.
  format_module(*model_, precision_, options_.channels_last);
  ddp_ = std::make_unique<DistributedDataParallel>(model_, w.comm, options_.ddp);
  if (precision_ == Precision::kBfloat16) {
    // A launched rank's caller has warned already; a restart warned at its first attempt.
    const std::string restart = env_or_empty(current_environment(), contract::kRestartCount);
    if (role_ == Role::kExternalRank && w.rank() == 0 && (restart.empty() || restart == "0")) warn_if_slow_bf16();
    autocast_ = std::make_unique<AutocastScope>(true);
  }
  *ddp_link_ = ddp_.get();
  optimizers_ = optimizers;
  const AutoLrOptions lr = options_.auto_lr.options;
  auto hook = std::make_shared<Hook>();
  // With checkpoints also for one rank (a factor of 1): a checkpoint of N ranks then resumes
  // at this world's rate, not at the N-fold one it saved.
  if (lr.enabled && (w.size() > 1 || checkpoints_)) {
    for (auto* opt : optimizers) {
      auto_lrs_.push_back(std::make_unique<AutoLr>(*opt, w.size(), lr));
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

void Session::detach() {
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

void Session::set_result(TrainResult result) {
  result_ = std::move(result);
  snapshot_optimizers();
}

void Session::snapshot_optimizers() {
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

Report Session::make_report() const {
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

void Session::take_report(Report report) {
  report_names_ = std::move(report.names);
  report_tensors_ = std::move(report.tensors);
  for (const std::string& bytes : report.optimizer_states) {
    std::istringstream in(bytes);
    auto one = std::make_shared<torch::serialize::InputArchive>();
    one->load_from(in);
    report_optimizers_.push_back(one);
  }
  result_ = std::move(report.result);
}

void end_launched_rank(int exit_code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::exit(exit_code);
}

int Session::finish_launched_rank(bool optimizers_alive) {
  int code = 0;
  try {
    if (optimizers_alive) snapshot_optimizers();
    const int rank = world().rank();
    if (rank == 0) write_report(env_or_empty(current_environment(), kResultVar), make_report());
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
