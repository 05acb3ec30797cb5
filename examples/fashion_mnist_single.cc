// Trains the LeNet-style CNN on Fashion-MNIST in one process with plain libtorch: the
// baseline the multi-process examples are compared with.
#include <torch/data/dataloader.h>
#include <torch/data/datasets/map.h>
#include <torch/data/samplers/random.h>
#include <torch/data/transforms/stack.h>
#include <torch/utils.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>

#include <nano/error.h>
#include "examples/common/fashion_mnist.h"
#include "examples/common/fashion_mnist_training.h"
#include "examples/common/models.h"
#include "examples/common/options.h"
#include "examples/common/progress.h"
#include "examples/common/throughput.h"
#include "examples/common/train.h"

namespace ex = nano::examples;

namespace {

constexpr const char* kProgram = "fashion_mnist_single";
// --help's words and the options this program offers (examples/common/options.h).
const ex::OptionsSpec kSpec = {
    .program = kProgram,
    .description = "Train a LeNet-style CNN on Fashion-MNIST in one process.",
};

int run(const ex::ExampleOptions& o) {
  if (o.num_processes != 1)
    throw nano::UsageError("--num-processes " + std::to_string(o.num_processes) + ": " + kProgram +
                           " trains in one process; use nano-run or fashion_mnist_nano for more");
  torch::manual_seed(o.seed);
  ex::FashionMnist train_set(o.data_dir, ex::Split::kTrain);
  ex::FashionMnist test_set(o.data_dir, ex::Split::kTest);
  ex::LeNet model;
  auto optimizer = ex::make_fashion_mnist_optimizer(*model, o.lr);
  const int64_t examples = static_cast<int64_t>(*train_set.size());
  auto loader = torch::data::make_data_loader(
      train_set.map(torch::data::transforms::Stack<>()), torch::data::samplers::RandomSampler(examples),
      torch::data::DataLoaderOptions().batch_size(static_cast<size_t>(o.batch_size)));
  const ex::StepFn step = [&](const at::Tensor& loss) {
    optimizer->zero_grad();
    loss.backward();
    optimizer->step();
  };
  std::printf(
      "%s: LeNet (%lld parameters), %lld training / %lld test images, batch %lld, lr %g, 1 process x %d threads\n",
      kProgram, static_cast<long long>(ex::count_parameters(*model)), static_cast<long long>(examples),
      static_cast<long long>(*test_set.size()), static_cast<long long>(o.batch_size), o.lr, at::get_num_threads());
  ex::RunTotals totals;
  for (int epoch = 1; epoch <= o.epochs; ++epoch) {
    ex::ProgressPrinter progress(stdout, epoch, o.epochs,
                                 ex::batches_per_epoch(examples, o.batch_size, o.max_steps_per_epoch));
    const ex::EpochResult r = ex::train_one_epoch(model, *loader, step, progress, o.max_steps_per_epoch);
    const int64_t n = o.test_limit > 0 ? std::min(o.test_limit, test_set.images().size(0)) : test_set.images().size(0);
    const double accuracy = ex::evaluate(model, test_set.images().narrow(0, 0, n), test_set.labels().narrow(0, 0, n));
    totals.add(r, accuracy);
    std::printf("%s\n", ex::format_epoch_summary(epoch, o.epochs, r, accuracy).c_str());
    std::fflush(stdout);
  }
  std::printf("%s\n", ex::format_run_summary(totals).c_str());
  // The same machine-readable line as the nano programs (here over all training steps).
  std::printf("%s\n",
              ex::format_nano_result(totals.seconds > 0 ? static_cast<double>(totals.images) / totals.seconds : 0.0, 1,
                                     at::get_num_threads(), totals.accuracies.back())
                  .c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return ex::run_fashion_mnist_main(argc, argv, kSpec, run); }
