#pragma once
// The Fashion-MNIST recipe shared by every launch style: optimizer choice, default rate, and
// the per-epoch and final summaries.
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "examples/common/options.h"
#include "examples/common/train.h"

namespace nano::examples {

/// Base learning rate of the Fashion-MNIST examples (per process, before auto_lr scaling).
inline constexpr double kFashionMnistDefaultLr = 1e-3;

/// main() of a Fashion-MNIST example: run_example_main with the learning rate defaulting to
/// kFashionMnistDefaultLr.
int run_fashion_mnist_main(int argc, const char* const* argv, const OptionsSpec& spec,
                           const std::function<int(const ExampleOptions&)>& run);

/// The optimizer the Fashion-MNIST examples train with (Adam) over `model`'s parameters.
std::unique_ptr<torch::optim::Optimizer> make_fashion_mnist_optimizer(torch::nn::Module& model, double lr);

/// Totals over a run's epochs.
struct RunTotals {
  int64_t images = 0;
  double seconds = 0;  ///< training time only (evaluation excluded)
  std::vector<double> accuracies;
  void add(const EpochResult& r, double accuracy) {
    images += r.images;
    seconds += r.seconds;
    accuracies.push_back(accuracy);
  }
};

/// "epoch 1/3: loss 0.5123, 60000 images in 25.3 s (2371.5 img/s), test accuracy 0.8712"; an epoch
/// resumed from a checkpoint counts what this run trained and says where it took over:
/// "... (2371.5 img/s) after resuming at batch 60 of 150, test accuracy 0.8712"
std::string format_epoch_summary(int epoch, int epochs, const EpochResult& r, double accuracy);

/// "final test accuracy 0.9034; trained 180000 images in 76.0 s: 2368.4 img/s"
std::string format_run_summary(const RunTotals& t);

}  // namespace nano::examples
