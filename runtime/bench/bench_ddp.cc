// One rank of the DDP overhead benchmark: `nano_bench_ddp MODEL MODE STEPS` with MODEL lenet
// (1x28x28) or resnet18 (3x32x32), MODE ddp (gradients averaged through
// nano::DistributedDataParallel) or local (the same step, no DDP), batch 64 per rank, SGD.
// Prints "RESULT <model> <mode> <comm> <rank> <median step ms> <peak RSS MB>".
#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "env-init/error.h"
#include "runtime/bench/models.h"
#include "runtime/context.h"
#include "runtime/ddp.h"

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <class Model>
double run(nano::World& world, Model model, bool ddp, int steps, at::IntArrayRef input_shape) {
  std::optional<nano::DDP<Model>> wrapped;
  if (ddp) wrapped.emplace(model, world.comm);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  auto x = at::randn(input_shape);
  auto y = at::randint(0, 10, {input_shape[0]}, at::TensorOptions().dtype(at::kLong));
  std::vector<double> times;
  const int warmup = 2;
  for (int i = 0; i < steps + warmup; ++i) {
    world.comm->barrier();  // both ranks start each step together in both modes
    const double t0 = now_ms();
    sgd.zero_grad();
    auto out = wrapped ? wrapped->forward(x) : model->forward(x);
    torch::nn::functional::cross_entropy(out, y).backward();
    sgd.step();
    const double t1 = now_ms();
    if (i >= warmup) times.push_back(t1 - t0);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: nano_bench_ddp lenet|resnet18 ddp|local STEPS\n");
    return 2;
  }
  const std::string model = argv[1], mode = argv[2];
  const int steps = std::atoi(argv[3]);
  try {
    nano::World world = nano::init();
    at::manual_seed(1);
    const bool ddp = mode == "ddp";
    double ms = 0;
    if (model == "lenet") {
      ms = run(world, nano::bench::LeNet(), ddp, steps, {64, 1, 28, 28});
    } else if (model == "resnet18") {
      ms = run(world, nano::bench::ResNet18(), ddp, steps, {64, 3, 32, 32});
    } else {
      std::fprintf(stderr, "nano_bench_ddp: bad model '%s'\n", model.c_str());
      return 2;
    }
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    std::printf("RESULT %s %s %s %d %.2f %.1f\n", model.c_str(), mode.c_str(),
                world.comm->name().c_str(), world.rank(), ms, usage.ru_maxrss / 1024.0);
    std::fflush(stdout);
    world.comm->barrier();
  } catch (const nano::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
