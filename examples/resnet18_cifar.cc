// Throughput program: ResNet-18 on synthetic 3x32x32 images, one process, timed steps.
#include <torch/data/dataloader.h>
#include <torch/data/datasets/map.h>
#include <torch/data/samplers/random.h>
#include <torch/data/transforms/stack.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "env-init/error.h"
#include "examples/common/models.h"
#include "examples/common/options.h"
#include "examples/common/progress.h"
#include "examples/common/train.h"

namespace ex = nano::examples;

namespace {

constexpr const char* kProgram = "resnet18_cifar";
// Untimed steps first: the allocator and oneDNN's kernel caches warm up on them.
constexpr int64_t kWarmupSteps = 3;

int run(const ex::ExampleOptions& o) {
  if (o.num_processes != 1)
    throw nano::UsageError("--num-processes " + std::to_string(o.num_processes) + ": " + kProgram +
                           " runs in one process; start several with nano-run");
  torch::manual_seed(0);
  ex::ResNet18 model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(o.lr).momentum(0.9));
  const int64_t steps = o.steps + kWarmupSteps;
  ex::SyntheticCifar data(static_cast<size_t>(steps * o.batch_size));
  auto loader = torch::data::make_data_loader(
      data.map(torch::data::transforms::Stack<>()), torch::data::samplers::RandomSampler(*data.size()),
      torch::data::DataLoaderOptions().batch_size(static_cast<size_t>(o.batch_size)));
  const ex::StepFn step = [&](const at::Tensor& loss) {
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
  };
  std::printf("%s: ResNet-18 (%lld parameters), synthetic 3x32x32, batch %lld, %lld timed steps after %lld warm-up, %d threads\n",
              kProgram, static_cast<long long>(ex::count_parameters(*model)), static_cast<long long>(o.batch_size),
              static_cast<long long>(o.steps), static_cast<long long>(kWarmupSteps), at::get_num_threads());
  ex::ProgressPrinter warmup(stdout, 0, 1, kWarmupSteps, false);
  ex::train_one_epoch(model, *loader, step, warmup, kWarmupSteps);
  ex::ProgressPrinter progress(stdout, 1, 1, o.steps);
  const ex::EpochResult r = ex::train_one_epoch(model, *loader, step, progress, o.steps);
  std::printf("%s: %lld images in %.2f s, mean loss %.4f\nthroughput %.1f img/s\n", kProgram,
              static_cast<long long>(r.images), r.seconds, r.mean_loss,
              r.seconds > 0 ? static_cast<double>(r.images) / r.seconds : 0.0);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    ex::ExampleOptions defaults;
    defaults.lr = 0.05;
    defaults.steps = 50;
    const auto parsed = ex::parse_example_options(
        argc, argv, defaults,
        {kProgram, "Measure ResNet-18 training throughput on synthetic 3x32x32 images.", false, false, true});
    if (!parsed.help.empty()) {
      std::cout << parsed.help;
      return 0;
    }
    return run(parsed.options);
  } catch (const nano::UsageError& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProgram, e.what());
    return 1;
  }
}
