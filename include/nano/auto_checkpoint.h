#pragma once
// nano's automatic checkpoints for in-program training (TorchNano, nano::nano()): the user's
// loop is theirs, so the checkpoints are taken where nano sees a step boundary — when one of
// its loaders hands out the next batch after a backward (the optimizer step of the previous
// batch is done, the next one not begun) — and restored at the first batch fetch of the run.
//
// A resumed training function runs again from its start: every loader hands out its finished
// passes empty and continues the interrupted one where it stopped, so an unchanged
// `for epoch: for batch in loader` loop trains exactly what was left, and per-epoch code sees
// empty epochs for those already done.
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nano/checkpoint.h>
#include <nano/sharding.h>

namespace nano {

class AutoLr;
class Communicator;

class AutoCheckpoint {
 public:
  /// Rank 0 makes `dir` (UsageError naming it when it cannot).
  AutoCheckpoint(std::string dir, std::shared_ptr<Communicator> comm, CheckpointOptions options);
  ~AutoCheckpoint();
  AutoCheckpoint(const AutoCheckpoint&) = delete;
  AutoCheckpoint& operator=(const AutoCheckpoint&) = delete;

  /// What a checkpoint holds besides the loaders (replacing an earlier call's). The objects
  /// must outlive this or the next track(). `precision` ("32", "64", "bf16") is written with
  /// each checkpoint, and a restore refuses one written in another. `on_restored(step)` runs
  /// after a restore.
  void track(torch::nn::Module& model, const std::vector<torch::optim::Optimizer*>& optimizers,
             const std::vector<AutoLr*>& warmups, const std::string& precision,
             std::function<void(int64_t)> on_restored);
  /// The hook for the next loader of this training (ShardOptions::hook); loaders are told
  /// apart by the order they are made in, the same in a resumed run.
  SamplerHook loader_hook();
  /// Counts a step (one backward).
  void backward();

 private:
  struct State;
  std::shared_ptr<State> state_;  // loader hooks hold it weakly: a loader may outlive this
};

}  // namespace nano
