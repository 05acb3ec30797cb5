#pragma once
// The caller's side of an in-program launch (nano::TorchNano, nano::nano in a plain process):
// it starts this program again as the ranks, waits for them, and takes back what rank 0
// reported, to load rank 0's trained weights and optimizers' state into the caller's own
// objects. The ranks' side is runtime/in_program_rank.h; <nano/in_program.h>'s Session holds
// the one of the two that this process's role needs.
#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>

#include <nano/precision.h>
#include <nano/torch_nano_options.h>
#include <nano/train_result.h>

namespace torch {
namespace nn {
class Module;
}
namespace optim {
class Optimizer;
}
namespace serialize {
class InputArchive;
}
}  // namespace torch

namespace nano {
namespace in_program {

struct Report;

/// One launch of this program's ranks and rank 0's report of it.
class CallerLaunch {
 public:
  /// `options` must outlive this object (the Session owns both).
  CallerLaunch(const TorchNanoOptions& options, Precision precision);
  ~CallerLaunch();
  CallerLaunch(const CallerLaunch&) = delete;
  CallerLaunch& operator=(const CallerLaunch&) = delete;

  /// Runs the ranks (this program re-executed) and waits; then reads rank 0's report.
  /// Throws UsageError (nothing started) or RankFailedError. Once done, does nothing.
  void launch();
  bool attempted() const { return attempted_; }
  /// Converts `model` as the ranks did theirs (precision "64": float64; channels_last), then
  /// copies rank 0's trained parameters and buffers into it (same names and shapes), and its
  /// optimizers' state into `optimizers` (the same kinds, in the same order). Throws Error
  /// naming what does not match.
  void load_trained(torch::nn::Module& model, const std::vector<torch::optim::Optimizer*>& optimizers) const;
  /// The value rank 0 set (empty before launch()).
  const TrainResult& result() const { return result_; }

 private:
  void take(Report report);

  const TorchNanoOptions& options_;
  Precision precision_;
  bool launched_ = false;
  bool attempted_ = false;
  std::vector<std::string> names_;  // rank 0's parameter and buffer names ("p:", "b:")
  std::vector<at::Tensor> tensors_;
  std::vector<std::shared_ptr<torch::serialize::InputArchive>> optimizers_;
  TrainResult result_;
};

}  // namespace in_program
}  // namespace nano
