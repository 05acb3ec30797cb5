#include <nano/torch_nano.h>

#include <exception>
#include <iostream>

#include <torch/optim/optimizer.h>

#include <nano/communicator.h>

namespace nano {

TorchNano::TorchNano(TorchNanoOptions options)
    : session_(std::make_unique<in_program::Session>(std::move(options))),
      uncaught_at_construction_(std::uncaught_exceptions()) {}

TorchNano::~TorchNano() {
  if (is_caller() && !session_->launch_attempted() && std::uncaught_exceptions() == uncaught_at_construction_) {
    std::cerr << "nano: warning: TorchNano: train() called no nano helper (setup, "
                 "setup_dataloader, backward, print0, set_result), so no ranks were started"
              << std::endl;
  }
  // A launched rank ends with its TorchNano (the seed's worker ends with train()). When an
  // exception is unwinding through here, let it reach main: a non-zero exit is the report.
  if (session_->role() == in_program::Role::kLaunchedRank && std::uncaught_exceptions() == uncaught_at_construction_) {
    in_program::end_launched_rank(session_->finish_launched_rank(/*optimizers_alive=*/false));
  }
}

int TorchNano::rank() { return is_caller() ? 0 : session_->world().rank(); }
int TorchNano::world_size() { return is_caller() ? 1 : session_->world().size(); }
bool TorchNano::is_main() { return !is_caller() && session_->world().is_main(); }

void TorchNano::backward(const at::Tensor& loss) {
  if (is_caller()) {
    session_->launch();
    return;
  }
  loss.backward();
}

World& TorchNano::world() {
  if (is_caller()) {
    // The caller's pass is a world of one whose collectives are the identity.
    if (!caller_world_) {
      caller_world_ = std::make_unique<World>();
      caller_world_->comm = std::make_shared<SelfCommunicator>();
    }
    return *caller_world_;
  }
  return session_->world();
}

}  // namespace nano
