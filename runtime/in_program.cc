#include <nano/in_program.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "runtime/in_program_caller.h"
#include "runtime/in_program_launch.h"
#include "runtime/in_program_rank.h"
#include "runtime/options/in_program_options.h"
#include "runtime/training_index.h"

namespace nano {
namespace in_program {
namespace {

std::string env_or_empty(const Environment& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

}  // namespace

Role role_from_env(const Environment& env) {
  const bool ranked = env.count("RANK") || env.count("OMPI_COMM_WORLD_RANK");
  if (!ranked) return Role::kCaller;
  return env.count(kMarkerVar) ? Role::kLaunchedRank : Role::kExternalRank;
}

Session::Session(TorchNanoOptions options) : options_(std::move(options)), role_(role_from_env(current_environment())) {
  // The training settings every role applies: checked here, before anything starts.
  Precision precision;
  try {
    precision = precision_of(options_);
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
  if (role_ == Role::kCaller)
    caller_ = std::make_unique<CallerLaunch>(options_, precision);
  else
    rank_ = std::make_unique<RankTraining>(options_, precision, role_);
}

Session::~Session() = default;

CallerLaunch& Session::caller() const {
  if (!caller_) throw Error("nano: internal: a caller's step asked of a rank");
  return *caller_;
}

RankTraining& Session::rank() const {
  if (!rank_) throw Error("nano: internal: a rank's step asked of the caller");
  return *rank_;
}

void Session::launch() {
  if (caller_) caller_->launch();
}

bool Session::launch_attempted() const { return caller_ && caller_->attempted(); }

void Session::load_trained(torch::nn::Module& model, const std::vector<torch::optim::Optimizer*>& optimizers) const {
  caller().load_trained(model, optimizers);
}

const TrainResult& Session::result() const { return caller_ ? caller_->result() : rank().result(); }

World& Session::world() { return rank().world(); }

void Session::attach(std::shared_ptr<torch::nn::Module> model, std::vector<torch::optim::Optimizer*> optimizers) {
  rank().attach(std::move(model), std::move(optimizers));
}

ShardOptions Session::loader_options(ShardOptions options, std::size_t per_rank_batch) {
  return rank().loader_options(std::move(options), per_rank_batch);
}

std::size_t Session::resumed_batches() const { return rank_ ? rank_->resumed_batches() : 0; }

void Session::set_result(TrainResult result) { rank().set_result(std::move(result)); }

int Session::finish_launched_rank(bool optimizers_alive) { return rank().finish_launched_rank(optimizers_alive); }

void end_launched_rank(int exit_code) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  std::exit(exit_code);
}

}  // namespace in_program
}  // namespace nano
