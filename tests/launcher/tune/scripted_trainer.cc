// A training program whose speed per layout is scripted, for the tuning tests: nano::init, a
// sharded loader and (with several ranks) nano::DDP over a tiny model, as a real program on
// nano's runtime is, and after each step a sleep taken from a table keyed by its layout.
//
//   SCRIPT="1/jemalloc=40 2/*=30 4/*=fail" scripted_trainer [STEPS]
//
// Each entry is RANKS/ALLOCATOR=MILLISECONDS (or =fail: rank 1, or rank 0 alone, exits 3 after
// two steps); ALLOCATOR is jemalloc, tcmalloc or system (what LD_PRELOAD holds) or *. The
// first matching entry counts; a layout with none sleeps 100 ms. STEPS (default 1000) bounds
// the run. With SCRIPT_CHECKPOINT=DIR it also keeps an AutoCheckpoint there every 2 steps.
// Prints "scripted: N ranks, ALLOCATOR, M ms a step".
#include <torch/data.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include <nano/auto_checkpoint.h>
#include <nano/context.h>
#include <nano/ddp.h>
#include <nano/sharding.h>

namespace {

struct Tiny : torch::data::datasets::Dataset<Tiny> {
  torch::data::Example<> get(size_t i) override {
    return {torch::full({4}, static_cast<float>(i % 7)), torch::full({1}, static_cast<float>(i % 3))};
  }
  torch::optional<size_t> size() const override { return 1u << 20; }
};

std::string allocator_here() {
  const char* preload = std::getenv("LD_PRELOAD");
  const std::string p = preload ? preload : "";
  if (p.find("jemalloc") != std::string::npos) return "jemalloc";
  if (p.find("tcmalloc") != std::string::npos) return "tcmalloc";
  return "system";
}

// The table's milliseconds for this layout; -1 = fail.
int scripted_ms(int ranks, const std::string& allocator) {
  const char* script = std::getenv("SCRIPT");
  std::istringstream in(script ? script : "");
  std::string entry;
  while (in >> entry) {
    const auto slash = entry.find('/'), eq = entry.find('=');
    if (slash == std::string::npos || eq == std::string::npos) continue;
    const int r = std::atoi(entry.substr(0, slash).c_str());
    const std::string a = entry.substr(slash + 1, eq - slash - 1);
    const std::string v = entry.substr(eq + 1);
    if (r != ranks || (a != "*" && a != allocator)) continue;
    return v == "fail" ? -1 : std::atoi(v.c_str());
  }
  return 100;
}

}  // namespace

int main(int argc, char** argv) {
  const long steps = argc > 1 ? std::atol(argv[1]) : 1000;
  nano::World world = nano::init();
  const std::string allocator = allocator_here();
  const int ms = scripted_ms(world.size(), allocator);
  if (world.is_main()) std::printf("scripted: %d ranks, %s, %d ms a step\n", world.size(), allocator.c_str(), ms);
  std::fflush(stdout);
  torch::manual_seed(0);
  torch::nn::Linear model(4, 1);
  std::unique_ptr<nano::DDP<torch::nn::Linear>> ddp;
  if (world.size() > 1) ddp = std::make_unique<nano::DDP<torch::nn::Linear>>(model, world.comm);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01));
  std::unique_ptr<nano::AutoCheckpoint> checkpoints;
  nano::ShardOptions shard;
  if (const char* dir = std::getenv("SCRIPT_CHECKPOINT")) {
    checkpoints = std::make_unique<nano::AutoCheckpoint>(dir, world.comm, nano::CheckpointOptions{.every_steps = 2});
    checkpoints->track(*model, {&optimizer}, {}, "32", [](int64_t) {});
    shard.hook = checkpoints->loader_hook();
  }
  auto loader = nano::make_sharded_loader(Tiny().map(torch::data::transforms::Stack<>()), world, 16, shard);
  long done = 0;
  for (auto& batch : *loader) {
    if (done == steps) break;
    optimizer.zero_grad();
    const at::Tensor out = ddp ? ddp->forward(batch.data) : model->forward(batch.data);
    torch::mse_loss(out, batch.target).backward();
    if (checkpoints) checkpoints->backward();
    optimizer.step();
    ++done;
    if (ms < 0 && done == 2 && (world.rank() == 1 || world.size() == 1)) return 3;
    std::this_thread::sleep_for(std::chrono::milliseconds(ms < 0 ? 10 : ms));
  }
  return 0;
}
