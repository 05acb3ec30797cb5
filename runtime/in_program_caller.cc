#include "runtime/in_program_caller.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/serialize/input-archive.h>
#include <torch/utils.h>

#include <nano/auto_checkpoint.h>
#include "core/rank_contract.h"
#include "runtime/folder_claim/folder_claim.h"
#include "runtime/in_program_launch.h"
#include "runtime/in_program_report.h"
#include "runtime/options/in_program_options.h"
#include "runtime/timeline/step_report.h"  // in_tuning_trial
#include "runtime/training_index.h"

namespace nano {
namespace in_program {
namespace {

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

}  // namespace

CallerLaunch::CallerLaunch(const TorchNanoOptions& options, Precision precision)
    : options_(options), precision_(precision) {}

CallerLaunch::~CallerLaunch() = default;

void CallerLaunch::launch() {
  if (launched_) return;
  attempted_ = true;
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
      prepare_checkpoint_dir(options_.checkpoint_dir, options_.checkpoint_shared_folder);
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
    take(read_report(path));
  } catch (...) {
    ::unlink(path.c_str());
    throw;
  }
  ::unlink(path.c_str());
  launched_ = true;
}

void CallerLaunch::load_trained(torch::nn::Module& model,
                                const std::vector<torch::optim::Optimizer*>& optimizers) const {
  if (names_.empty()) {
    throw Error("nano: rank 0 reported no model (its training never called setup() with one)");
  }
  std::map<std::string, at::Tensor> mine;
  for (auto& p : model.named_parameters(true)) mine["p:" + p.key()] = p.value();
  for (auto& b : model.named_buffers(true)) mine["b:" + b.key()] = b.value();
  if (mine.size() != names_.size()) {
    throw Error("nano: rank 0's model has " + std::to_string(names_.size()) + " parameters and buffers, the caller's " +
                std::to_string(mine.size()));
  }
  // The ranks' dtype and layout, so that the optimizers' state loaded below fits it.
  format_module(model, precision_, options_.channels_last);
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < names_.size(); ++i) {
    auto it = mine.find(names_[i]);
    if (it == mine.end()) {
      throw Error("nano: the caller's model has no " + names_[i].substr(2) + " (rank 0's model has)");
    }
    if (!it->second.sizes().equals(tensors_[i].sizes())) {
      throw Error("nano: " + names_[i].substr(2) + " has another shape in the caller's model");
    }
    it->second.copy_(tensors_[i]);
  }
  if (optimizers_.empty()) return;  // rank 0 said why (a warning line)
  if (optimizers_.size() != optimizers.size()) {
    throw Error("nano: rank 0 trained " + std::to_string(optimizers_.size()) + " optimizers, the caller has " +
                std::to_string(optimizers.size()));
  }
  for (std::size_t i = 0; i < optimizers.size(); ++i) load_optimizer(*optimizers[i], *optimizers_[i]);
}

void CallerLaunch::take(Report report) {
  names_ = std::move(report.names);
  tensors_ = std::move(report.tensors);
  for (const std::string& bytes : report.optimizer_states) {
    std::istringstream in(bytes);
    auto one = std::make_shared<torch::serialize::InputArchive>();
    one->load_from(in);
    optimizers_.push_back(one);
  }
  result_ = std::move(report.result);
}

}  // namespace in_program
}  // namespace nano
