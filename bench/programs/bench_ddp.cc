// One rank of the DDP overhead benchmark: `nano_bench_ddp MODEL MODE STEPS` with MODEL lenet
// (1x28x28) or resnet18 (3x32x32), batch 64 per rank, SGD with momentum.
// MODE ddp: the model wrapped in nano::DistributedDataParallel; steps alternate between
// gradient sync and the same step under no_sync(), so both medians see the same machine load.
// Prints "RESULT <model> ddp <comm> <rank> <sync ms> <no-sync ms> <peak RSS MB>".
// MODE local: no DDP at all (for the memory baseline):
// "RESULT <model> local <comm> <rank> <ms> <ms> <peak RSS MB>".
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

#include <nano/context.h>
#include <nano/ddp.h>
#include <nano/error.h>
#include "bench/programs/models.h"

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class Model>
std::pair<double, double> run(nano::World& world, Model model, bool ddp, int steps, at::IntArrayRef input_shape) {
  std::optional<nano::DDP<Model>> wrapped;
  if (ddp) wrapped.emplace(model, world.comm);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  auto x = at::randn(input_shape);
  auto y = at::randint(0, 10, {input_shape[0]}, at::TensorOptions().dtype(at::kLong));
  std::vector<double> times[2];  // [0] with sync, [1] without
  const int warmup = 2;
  for (int i = 0; i < 2 * steps + warmup; ++i) {
    const bool sync = ddp && i % 2 == 0;
    world.comm->barrier();  // both ranks start each step together in both modes
    const double t0 = now_ms();
    {
      std::optional<nano::DistributedDataParallel::NoSync> guard;
      if (wrapped && !sync) guard.emplace(wrapped->no_sync());
      sgd.zero_grad();
      auto out = wrapped ? wrapped->forward(x) : model->forward(x);
      torch::nn::functional::cross_entropy(out, y).backward();
      sgd.step();
    }
    const double t1 = now_ms();
    if (i >= warmup) times[sync ? 0 : 1].push_back(t1 - t0);
  }
  auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  return {median(times[0]), median(times[1])};
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
    std::pair<double, double> ms;
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
    if (!ddp) ms.first = ms.second;
    std::printf("RESULT %s %s %s %d %.2f %.2f %.1f\n", model.c_str(), mode.c_str(), world.comm->name().c_str(),
                world.rank(), ms.first, ms.second, usage.ru_maxrss / 1024.0);
    std::fflush(stdout);
    world.comm->barrier();
  } catch (const nano::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
