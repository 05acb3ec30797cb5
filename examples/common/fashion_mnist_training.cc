#include "examples/common/fashion_mnist_training.h"

#include <torch/optim/adam.h>

#include <cstdio>

namespace nano::examples {

int run_fashion_mnist_main(int argc, const char* const* argv, const OptionsSpec& spec,
                           const std::function<int(const ExampleOptions&)>& run) {
  ExampleOptions defaults;
  defaults.lr = kFashionMnistDefaultLr;
  return run_example_main(argc, argv, defaults, spec, run);
}

std::unique_ptr<torch::optim::Optimizer> make_fashion_mnist_optimizer(torch::nn::Module& model, double lr) {
  return std::make_unique<torch::optim::Adam>(model.parameters(), torch::optim::AdamOptions(lr));
}

std::string format_epoch_summary(int epoch, int epochs, const EpochResult& r, double accuracy) {
  char resumed[96] = "";
  if (r.resumed_batches > 0)
    std::snprintf(resumed, sizeof resumed, " after resuming at batch %lld of %lld",
                  static_cast<long long>(r.resumed_batches), static_cast<long long>(r.resumed_batches + r.batches));
  char buf[320];
  std::snprintf(buf, sizeof buf, "epoch %d/%d: loss %.4f, %lld images in %.1f s (%s)%s, test accuracy %.4f", epoch,
                epochs, r.mean_loss, static_cast<long long>(r.images), r.seconds,
                format_rate(r.images, r.seconds).c_str(), resumed, accuracy);
  return buf;
}

std::string format_run_summary(const RunTotals& t) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "final test accuracy %.4f; trained %lld images in %.1f s: %s",
                t.accuracies.empty() ? 0.0 : t.accuracies.back(), static_cast<long long>(t.images), t.seconds,
                format_rate(t.images, t.seconds).c_str());
  return buf;
}

}  // namespace nano::examples
