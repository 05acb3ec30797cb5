// Trains the LeNet-style CNN on Fashion-MNIST with nano::TorchNano, the subclass API (the
// seed's TorchNano page): train() holds an ordinary libtorch loop, and setup(),
// setup_dataloader() and backward() make it data-parallel over several ranks.
//
//   fashion_mnist_nano --num-processes 2   # starts 2 pinned ranks of itself and waits
//   nano-run -n 2 fashion_mnist_nano       # each rank joins nano-run's world instead
#include <torch/data.h>
#include <torch/optim/adam.h>
#include <torch/utils.h>

#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>

#include <nano/checkpoint.h>
#include <nano/communicator.h>
#include <nano/torch_nano.h>
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

constexpr const char* kProgram = "fashion_mnist_nano";
// --help's words and the options this program offers (examples/common/options.h).
const ex::OptionsSpec kSpec = {
    .program = kProgram,
    .description = "Train a LeNet-style CNN on Fashion-MNIST on several ranks with nano::TorchNano.",
    .in_program = true,
    .checkpoints = true,
};
constexpr int64_t kTrainExamples = 60000;  // Fashion-MNIST's training split (sizes the warm-up)

class FashionMnistNano : public nano::TorchNano {
 public:
  FashionMnistNano(const ex::ExampleOptions& o, int64_t steps_per_epoch)
      : TorchNano(ex::fashion_mnist_nano_options(o, steps_per_epoch)), o_(o) {}

  ex::LeNet model;

  void train() override {
    torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(o_.lr));
    // In the caller, setup() runs the whole training on the ranks and then loads rank 0's
    // trained weights into `model`; the caller has nothing left to do here.
    setup(model, optimizer);
    if (is_caller()) return;

    ex::FashionMnist train_set(o_.data_dir, ex::Split::kTrain);
    ex::FashionMnist test_set(o_.data_dir, ex::Split::kTest);
    // The loader itself stops each epoch at --max-steps-per-epoch, so that an epoch resumed
    // from a checkpoint (--checkpoint-dir) ends where the original would have.
    nano::ShardOptions shard;
    shard.max_batches = static_cast<size_t>(o_.max_steps_per_epoch);
    auto loader =
        setup_dataloader(train_set.map(torch::data::transforms::Stack<>()), static_cast<size_t>(o_.batch_size), shard);
    const int64_t steps = ex::rank_steps_per_epoch(o_, static_cast<int64_t>(*train_set.size()), world_size());
    print0(kProgram, ": LeNet (", ex::count_parameters(*model), " parameters), ", *train_set.size(), " training / ",
           *test_set.size(), " test images, ", world_size(), " ranks x ", at::get_num_threads(), " threads, batch ",
           o_.batch_size, " per rank, lr ", o_.lr, ", auto_lr ", o_.auto_lr && world_size() > 1 ? "on" : "off");

    ex::StepTimer timer(ex::warmup_steps_for(steps * o_.epochs));
    double accuracy = 0;
    for (int epoch = 1; epoch <= o_.epochs; ++epoch) {
      ex::ProgressPrinter progress(stdout, epoch, o_.epochs, steps, is_main());
      ex::EpochResult r;
      double loss_sum = 0;
      const auto start = std::chrono::steady_clock::now();
      timer.epoch_begin();
      model->train();
      for (auto& batch : *loader) {
        optimizer.zero_grad();
        const at::Tensor loss = ex::classification_loss(model->forward(batch.data), batch.target);
        backward(loss);  // gradients arrive averaged over the ranks
        optimizer.step();
        const double l = loss.item<double>();
        if (r.batches == 0) {  // a resumed epoch goes on from where the interrupted run was
          r.resumed_batches = static_cast<int64_t>(resumed_batches());
          progress.resume_after(r.resumed_batches);
        }
        // All ranks' samples this step (nano may split them unevenly by rank speed); the timer
        // counts this rank's own.
        const int64_t images =
            ex::global_step_samples(*train_set.size(), o_.batch_size, world_size(), r.resumed_batches + r.batches);
        timer.step_end(batch.data.size(0));
        ++r.batches;
        r.images += images;
        loss_sum += l;
        progress.update(1, images, l);
      }
      timer.epoch_end();
      progress.finish();
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      r.mean_loss = r.batches > 0 ? loss_sum / static_cast<double>(r.batches) : 0;
      accuracy = test_accuracy(test_set);
      // A run resumed from a checkpoint passes the epochs it had finished without batches.
      if (r.batches > 0) print0(ex::format_epoch_summary(epoch, o_.epochs, r, accuracy));
    }

    const std::vector<double> timed = world().comm->gather({static_cast<double>(timer.images()), timer.seconds()});
    if (is_main()) {
      const double rate = ex::global_images_per_sec(timed);
      std::printf("final test accuracy %.4f; %.1f img/s over the timed steps of %d ranks\n", accuracy, rate,
                  world_size());
      std::printf("%s\n", ex::format_nano_result(rate, world_size(), at::get_num_threads(), accuracy,
                                                 o_.step_times ? timer.step_milliseconds() : std::vector<double>{})
                              .c_str());
      std::fflush(stdout);
      set_result(accuracy);
    }
  }

 private:
  // Each rank evaluates its slice of the test set; rank 0 adds up the counts.
  double test_accuracy(const ex::FashionMnist& test_set) {
    const ex::RowRange rows = ex::evaluation_shard(test_set.images().size(0), o_.test_limit, rank(), world_size());
    const int64_t correct = ex::correct_predictions(model, test_set.images().narrow(0, rows.begin, rows.length),
                                                    test_set.labels().narrow(0, rows.begin, rows.length));
    const std::vector<double> counts =
        world().comm->gather({static_cast<double>(correct), static_cast<double>(rows.length)});
    world().comm->barrier();  // the next epoch's clocks start together
    double hits = 0, total = 0;
    for (size_t i = 0; i + 1 < counts.size(); i += 2) {
      hits += counts[i];
      total += counts[i + 1];
    }
    return total > 0 ? hits / total : 0.0;
  }

  ex::ExampleOptions o_;
};

int run(const ex::ExampleOptions& o) {
  if (!o.checkpoint_dir.empty()) nano::prepare_checkpoint_dir(o.checkpoint_dir);  // a bad folder: exit 2 now
  torch::manual_seed(o.seed);
  const int world = ex::planned_world_size(o);
  FashionMnistNano trainer(o, ex::rank_steps_per_epoch(o, kTrainExamples, world));
  trainer.train();
  if (trainer.is_caller()) {
    std::printf(
        "%s: %s finished; rank 0 reported test accuracy %.4f, and its trained weights are in "
        "this process's model\n",
        kProgram, ex::ranks_text(o, world).c_str(), trainer.result<double>());
    if (o.print_weights) std::printf("weights %s\n", ex::weights_fingerprint(*trainer.model).c_str());
  } else if (o.print_weights && trainer.is_main()) {
    // A rank of nano-run's world (the program run under nano-run): rank 0 has the weights.
    std::printf("weights %s\n", ex::weights_fingerprint(*trainer.model).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return ex::run_fashion_mnist_main(argc, argv, kSpec, run); }
