// Checkpoint cost for LeNet and ResNet-18 with Adam (one process): file size, the time the
// training thread is held (copying the state for the background writer), a plain copy of the
// same tensors (every parameter, buffer and Adam moment copied into memory in use: the floor;
// goal held <= 2x it), the background write (serialisation, checksum, temporary file, fsync, rename, fsync of
// the folder), and a restore. With those, the step-time overhead at a checkpoint frequency is
// the held time over the interval between checkpoints (goal <= 1% at one every 10 s).
// The held and written times are of one checkpointer saving REPEATS times (LeNet 10 x REPEATS;
// its staging buffers made by the first save, reused by the others), each after the previous
// file was written.
// Usage: nano_bench_checkpoint DIR [REPEATS]   (prints one table)
#include <torch/optim/adam.h>

#include <sys/stat.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nano/checkpoint.h>
#include <nano/communicator.h>
#include "bench/programs/models.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class Model>
void measure(const char* name, Model model, torch::Tensor input, const std::string& dir, int repeats) {
  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(1e-3));
  auto loss = model->forward(input).pow(2).mean();
  loss.backward();
  opt.step();  // Adam's moments exist: the state a real checkpoint carries
  std::vector<double> held, copied, written, restored;
  off_t bytes = 0;
  auto comm = std::make_shared<nano::SelfCommunicator>();
  std::system(("rm -rf " + dir).c_str());
  // One checkpointer saving again and again, as in training: the first save makes the staging
  // buffers, later ones reuse them.
  nano::Checkpointer ckpt(dir, comm);
  ckpt.track("model", *model).track("optimizer", opt);
  std::vector<torch::Tensor> copies;
  for (int i = 0; i < repeats; ++i) {
    {
      // The floor: one plain copy of every tensor the checkpoint holds, into memory already in
      // use (as the checkpointer's staging buffers are after its first save): no page faults,
      // whose cost depends on the allocator's state more than on the bytes.
      torch::NoGradGuard no_grad;
      std::vector<torch::Tensor> from;
      for (const auto& p : model->parameters()) from.push_back(p);
      for (const auto& b : model->buffers()) from.push_back(b);
      for (auto& entry : opt.state()) {
        auto& s = static_cast<torch::optim::AdamParamState&>(*entry.second);
        from.push_back(s.exp_avg());
        from.push_back(s.exp_avg_sq());
      }
      if (copies.empty())
        for (const auto& t : from) copies.push_back(torch::empty_like(t));
      const auto c0 = Clock::now();
      for (std::size_t k = 0; k < from.size(); ++k) copies[k].copy_(from[k]);
      copied.push_back(std::chrono::duration<double, std::milli>(Clock::now() - c0).count());
    }
    ckpt.step();
    const auto t0 = Clock::now();
    ckpt.save();
    held.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    ckpt.wait();
    struct stat st {};
    stat(ckpt.last_path().c_str(), &st);
    written.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    bytes = st.st_size;
  }
  for (int i = 0; i < repeats; ++i) {
    nano::Checkpointer r(dir, comm);
    r.track("model", *model).track("optimizer", opt);
    const auto t1 = Clock::now();
    r.restore();
    restored.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t1).count());
  }
  const double h = median(held), c = median(copied);
  std::printf("%-9s %9.1f %10.3f %9.3f %8.2f %12.1f %11.1f %14.3f %14.3f\n", name, bytes / 1e6, h, c, h / c,
              median(written), median(restored), 100.0 * h / 60000.0, 100.0 * h / 10000.0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: nano_bench_checkpoint DIR [REPEATS]\n");
    return 2;
  }
  const std::string dir = argv[1];
  const int repeats = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  torch::manual_seed(0);
  std::printf("checkpoint of model + Adam, median of %d saves (LeNet %d; one process)\n", repeats, 10 * repeats);
  std::printf("%-9s %9s %10s %9s %8s %12s %11s %14s %14s\n", "model", "size MB", "held ms", "copy ms", "held/copy",
              "written ms", "restore ms", "% @ 1/min", "% @ 1/10 s");
  // LeNet's save takes tens of microseconds, within a VM's scheduling noise: 10 times the saves
  // for a steady median (each writes 0.8 MB).
  measure("lenet", nano::bench::LeNet(), torch::randn({64, 1, 28, 28}), dir, 10 * repeats);
  measure("resnet18", nano::bench::ResNet18(), torch::randn({8, 3, 32, 32}), dir, repeats);
  std::system(("rm -rf " + dir).c_str());
  return 0;
}
