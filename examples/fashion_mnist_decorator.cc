// Trains the LeNet-style CNN on Fashion-MNIST with nano::nano(...), the wrapper (the seed's
// @nano page): `train_loop` is an ordinary training function over a model, an optimizer and
// a loader; wrapping it runs it data-parallel on several ranks. The model is found by type
// and wrapped for gradient averaging, auto_lr applies to the optimizer, the loader is sharded.
//
//   fashion_mnist_decorator --num-processes 2   # starts 2 pinned ranks of itself and waits
//   nano-run -n 2 fashion_mnist_decorator       # each rank joins nano-run's world instead
#include <torch/data.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>

#include <nano/checkpoint.h>
#include <nano/nano_wrapper.h>
#include "examples/common/fashion_mnist.h"
#include "examples/common/fashion_mnist_training.h"
#include "examples/common/models.h"
#include "examples/common/nano_options.h"
#include "examples/common/options.h"
#include "examples/common/progress.h"
#include "examples/common/throughput.h"
#include "examples/common/train.h"

namespace ex = nano::examples;

namespace {

constexpr const char* kProgram = "fashion_mnist_decorator";
// --help's words and the options this program offers (examples/common/options.h).
const ex::OptionsSpec kSpec = {
    .program = kProgram,
    .description = "Train a LeNet-style CNN on Fashion-MNIST on several ranks with nano::nano(...).",
    .in_program = true,
    .checkpoints = true,
};
constexpr int64_t kTrainExamples = 60000;  // Fashion-MNIST's training split (sizes the warm-up)

using TrainData = decltype(std::declval<ex::FashionMnist>().map(torch::data::transforms::Stack<>()));

// The training function, as one writes it for a single process. The only nod to ranks: the
// loader knows its shard, so rank 0 alone prints and evaluates.
double train_loop(ex::LeNet model, torch::optim::Adam& optimizer, nano::ShardableLoader<TrainData>& loader, int epochs,
                  const ex::FashionMnist& test_set, const ex::ExampleOptions& o) {
  const bool main_rank = loader.rank() == 0;
  const int world = loader.world_size();
  const int64_t steps = ex::rank_steps_per_epoch(o, kTrainExamples, world);
  if (main_rank)
    std::printf("%s: LeNet (%lld parameters), %d ranks x %d threads, batch %lld per rank, lr %g, auto_lr %s\n",
                kProgram, static_cast<long long>(ex::count_parameters(*model)), world, at::get_num_threads(),
                static_cast<long long>(o.batch_size), o.lr, o.auto_lr && world > 1 ? "on" : "off");
  ex::StepTimer timer(ex::warmup_steps_for(steps * epochs));
  double accuracy = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    ex::ProgressPrinter progress(stdout, epoch, epochs, steps, main_rank);
    ex::EpochResult r;
    double loss_sum = 0;
    const auto start = std::chrono::steady_clock::now();
    timer.epoch_begin();
    model->train();
    for (auto& batch : loader) {
      optimizer.zero_grad();
      const at::Tensor loss = ex::classification_loss(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      const double l = loss.item<double>();
      if (r.batches == 0) {  // a resumed epoch goes on from where the interrupted run was
        r.resumed_batches = static_cast<int64_t>(loader.resumed_batches());
        progress.resume_after(r.resumed_batches);
      }
      // All ranks' samples this step (nano may split them unevenly by rank speed).
      const int64_t images =
          ex::global_step_samples(kTrainExamples, o.batch_size, world, r.resumed_batches + r.batches);
      timer.step_end(images);
      ++r.batches;
      r.images += images;
      loss_sum += l;
      progress.update(1, images, l);
    }
    timer.epoch_end();
    progress.finish();
    if (!main_rank) continue;  // the others go on to the next epoch and wait in its first step
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    r.mean_loss = r.batches > 0 ? loss_sum / static_cast<double>(r.batches) : 0;
    const int64_t n = o.test_limit > 0 ? std::min(o.test_limit, test_set.images().size(0)) : test_set.images().size(0);
    accuracy = ex::evaluate(model, test_set.images().narrow(0, 0, n), test_set.labels().narrow(0, 0, n));
    // A run resumed from a checkpoint passes the epochs it had finished without batches.
    if (r.batches > 0) std::printf("%s\n", ex::format_epoch_summary(epoch, epochs, r, accuracy).c_str());
    std::fflush(stdout);
  }
  if (main_rank) {
    // Rank 0's clock covers the run (every step waits for all ranks' gradients); the timer
    // counted every rank's images.
    const double rate = timer.seconds() > 0 ? static_cast<double>(timer.images()) / timer.seconds() : 0.0;
    std::printf("final test accuracy %.4f; %.1f img/s over the timed steps of %d ranks\n", accuracy, rate, world);
    std::printf("%s\n", ex::format_nano_result(rate, world, at::get_num_threads(), accuracy,
                                               o.step_times ? timer.step_milliseconds() : std::vector<double>{})
                            .c_str());
    std::fflush(stdout);
  }
  return accuracy;
}

int run(const ex::ExampleOptions& o) {
  if (!o.checkpoint_dir.empty()) nano::prepare_checkpoint_dir(o.checkpoint_dir);  // a bad folder: exit 2 now
  torch::manual_seed(o.seed);
  ex::FashionMnist train_set(o.data_dir, ex::Split::kTrain);
  ex::FashionMnist test_set(o.data_dir, ex::Split::kTest);
  ex::LeNet model;
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(o.lr));
  // The loader itself stops each epoch at --max-steps-per-epoch, so that an epoch resumed from
  // a checkpoint (--checkpoint-dir) ends where the original would have.
  nano::ShardOptions shard;
  shard.max_batches = static_cast<size_t>(o.max_steps_per_epoch);
  nano::ShardableLoader<TrainData> loader(train_set.map(torch::data::transforms::Stack<>()),
                                          static_cast<size_t>(o.batch_size), shard);

  const int world = ex::planned_world_size(o);
  const auto options = ex::fashion_mnist_nano_options(o, ex::rank_steps_per_epoch(o, kTrainExamples, world));
  const double accuracy = nano::nano(options)(train_loop)(model, optimizer, loader, o.epochs, test_set, o);

  if (nano::in_program::role_from_env(nano::current_environment()) == nano::in_program::Role::kCaller)
    std::printf(
        "%s: %s finished; rank 0 returned test accuracy %.4f, and its trained weights are in "
        "this process's model\n",
        kProgram, ex::ranks_text(o, world).c_str(), accuracy);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return ex::run_fashion_mnist_main(argc, argv, kSpec, run); }
