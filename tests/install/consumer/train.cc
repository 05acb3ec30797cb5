// The README's "In your own libtorch program" sample, built against an installed nano and run
// under nano-run by tests/install. Learns y = 3x on synthetic data; rank 0 prints the weight.
#include <torch/torch.h>

#include <cstdio>

#include <nano/nano.h>

struct NetImpl : torch::nn::Module {
  torch::nn::Linear fc{register_module("fc", torch::nn::Linear(1, 1))};
  torch::Tensor forward(const torch::Tensor& x) { return fc(x); }
};
TORCH_MODULE(Net);

struct Line : torch::data::datasets::Dataset<Line> {
  torch::data::Example<> get(size_t i) override {
    auto x = torch::full({1}, static_cast<float>(i % 16) / 16.0f);
    return {x, 3 * x};
  }
  torch::optional<size_t> size() const override { return 256; }
};

int main() {
  nano::World world = nano::init();    // rank contract from nano-run / mpirun / torchrun
  torch::manual_seed(world.rank());    // replicas start different; DDP makes them equal
  nano::DDP model(Net(), world.comm);  // broadcast from rank 0, bucketed all-reduce
  torch::optim::SGD opt(model->parameters(), 0.5);
  nano::AutoLr warmup(opt, world.size());  // lr warms up from base to base x N
  auto loader = nano::make_sharded_loader(Line().map(torch::data::transforms::Stack<>()), world,
                                          /*batch per rank=*/16);
  for (int epoch = 0; epoch < 30; ++epoch) {
    for (auto& batch : *loader) {  // a new shuffle of this rank's shard each epoch
      opt.zero_grad();
      torch::mse_loss(model(batch.data), batch.target).backward();  // gradients averaged
      opt.step();
      warmup.step();
    }
  }
  if (world.is_main()) std::printf("world %d weight %.3f\n", world.size(), model->fc->weight.item<float>());
}
