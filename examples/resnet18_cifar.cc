// Throughput program: ResNet-18 on synthetic 3x32x32 images, timed steps. Started plainly it
// trains in one process; under `nano-run -n k` (or mpirun) each rank joins the world through
// nano::init, trains its shard through nano::DDP, and rank 0 reports the global rate.
#include <torch/data.h>
#include <torch/optim/sgd.h>
#include <torch/utils.h>

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdio>
#include <memory>

#include <nano/error.h>
#include <nano/nano.h>
#include "examples/common/models.h"
#include "examples/common/options.h"
#include "examples/common/progress.h"
#include "examples/common/throughput.h"
#include "examples/common/train.h"

namespace ex = nano::examples;

namespace {

constexpr const char* kProgram = "resnet18_cifar";
// Untimed steps first: the allocator and oneDNN's kernel caches warm up on them.
constexpr int64_t kWarmupSteps = 3;

int run(const ex::ExampleOptions& o) {
  if (o.num_processes != 1)
    throw nano::UsageError("--num-processes " + std::to_string(o.num_processes) + ": " + kProgram +
                           " does not launch ranks itself; start several with nano-run -n " +
                           std::to_string(o.num_processes));
  if (!o.checkpoint_dir.empty()) nano::prepare_checkpoint_dir(o.checkpoint_dir);  // a bad folder: exit 2 now
  nano::World world = nano::init();                                               // a world of one when started plainly
  torch::manual_seed(o.seed);
  ex::ResNet18 model;
  // DDP broadcasts rank 0's weights, averages gradients during backward and, before each
  // forward, copies rank 0's batch-norm statistics (as PyTorch's DDP does by default).
  // --precision 64 and --channels-last convert the model before DDP broadcasts it.
  const nano::Precision precision = nano::parse_precision(o.precision);
  nano::format_module(*model, precision, o.channels_last);
  std::unique_ptr<nano::DDP<ex::ResNet18>> ddp;
  if (world.size() > 1)
    ddp = std::make_unique<nano::DDP<ex::ResNet18>>(model, world.comm,
                                                    nano::DdpOptions{.bf16_gradient_exchange = o.bf16_gradients});
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(o.lr).momentum(0.9));
  const int64_t steps = o.steps + kWarmupSteps;
  // Each rank draws its own disjoint shard of a dataset world-size times one rank's steps.
  ex::SyntheticCifar data(static_cast<size_t>(steps * o.batch_size * world.size()));
  // With several ranks each step's world x batch samples are split by the ranks' measured
  // speed (DDP weights the gradients to match), so a slower core does not set everyone's pace.
  nano::ShardOptions shard;
  shard.format = nano::batch_format(precision, o.channels_last);
  if (ddp && o.balance) shard.balancer = nano::make_batch_balancer(*ddp, o.batch_size);
  // --checkpoint-dir: the model, the optimizer and the loader's position every
  // --checkpoint-every steps, taken as the loader hands out the next batch; a run that finds
  // one there resumes from it (the step count too).
  int64_t done = 0;
  std::unique_ptr<nano::AutoCheckpoint> checkpoints;
  if (!o.checkpoint_dir.empty()) {
    checkpoints = std::make_unique<nano::AutoCheckpoint>(
        o.checkpoint_dir, world.comm,
        nano::CheckpointOptions{.every_steps = o.checkpoint_every, .keep = o.checkpoint_keep});
    checkpoints->track(*model, {&optimizer}, {}, nano::precision_name(precision),
                       [&done](int64_t step) { done = step; });
    shard.hook = checkpoints->loader_hook();
  }
  auto loader = nano::make_sharded_loader(data.map(torch::data::transforms::Stack<>()), world,
                                          static_cast<size_t>(o.batch_size), shard);
  if (world.is_main())
    std::printf(
        "%s: ResNet-18 (%lld parameters), synthetic 3x32x32, batch %lld per rank, %lld timed steps after %lld "
        "warm-up, %d ranks x %d threads\n",
        kProgram, static_cast<long long>(ex::count_parameters(*model)), static_cast<long long>(o.batch_size),
        static_cast<long long>(o.steps), static_cast<long long>(kWarmupSteps), world.size(), at::get_num_threads());

  ex::StepTimer timer(kWarmupSteps);
  ex::ProgressPrinter progress(stdout, 1, 1, steps, world.is_main());
  double loss_sum = 0;
  timer.epoch_begin();
  model->train();
  // --precision bf16: the steps run under CPU autocast to bfloat16 (weights stay float32).
  nano::AutocastScope autocast(precision == nano::Precision::kBfloat16);
  for (auto& batch : *loader) {
    if (done == steps) break;
    if (progress.state().done == 0) progress.resume_after(done);  // a resumed run: after its checkpoint's step
    optimizer.zero_grad();
    const at::Tensor logits = ddp ? ddp->forward(batch.data) : model->forward(batch.data);
    const at::Tensor loss = ex::classification_loss(logits, batch.target);
    loss.backward();
    if (checkpoints) checkpoints->backward();
    optimizer.step();
    const double l = loss.item<double>();
    timer.step_end(batch.data.size(0));
    ++done;
    if (done > kWarmupSteps) loss_sum += l;
    progress.update(1, o.batch_size * world.size(), l);  // the ranks share world x batch samples
  }
  timer.epoch_end();
  progress.finish();

  const std::vector<double> timed = world.comm->gather({static_cast<double>(timer.images()), timer.seconds()});
  if (world.is_main()) {
    const double rate = ex::global_images_per_sec(timed);
    double images = 0;  // every rank's own count: balanced ranks take different shares
    for (std::size_t i = 0; i < timed.size(); i += 2) images += timed[i];
    std::printf("%s: %lld images in %.2f s on %d ranks, mean loss %.4f\nthroughput %.1f img/s\n", kProgram,
                static_cast<long long>(images), timer.seconds(), world.size(),
                timer.steps() > 0 ? loss_sum / static_cast<double>(timer.steps()) : 0.0, rate);
    std::printf("%s\n", ex::format_nano_result(rate, world.size(), at::get_num_threads(), std::nullopt,
                                               o.step_times ? timer.step_milliseconds() : std::vector<double>{})
                            .c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ex::ExampleOptions defaults;
  defaults.lr = 0.05;
  defaults.steps = 50;
  return ex::run_example_main(
      argc, argv, defaults,
      {.program = kProgram,
       .description = "Measure ResNet-18 training throughput on synthetic 3x32x32 images (nano-run -n k for k ranks).",
       .data_dir = false,
       .epochs = false,
       .steps = true,
       .checkpoints = true},
      run);
}
