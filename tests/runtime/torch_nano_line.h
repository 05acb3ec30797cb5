#pragma once
// What torch_nano_test's unit tables (torch_nano_test.cc) and launch modes (torch_nano_modes.cc)
// share: the seed's one-weight line model, its data, and LineNano, the TorchNano that trains it.
#include <sched.h>
#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <torch/data.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <nano/torch_nano.h>

namespace nano::test {

/// The seed's equivalence data: x = [0, 0, 1, 1], targets 0.
struct LineData : torch::data::datasets::Dataset<LineData> {
  torch::data::Example<> get(std::size_t i) override {
    const float x[] = {0, 0, 1, 1};
    return {torch::full({1}, x[i]), torch::zeros({1})};
  }
  torch::optional<std::size_t> size() const override { return 4; }
};
/// LineData in batches, as the loaders take it.
using Data = decltype(LineData().map(torch::data::transforms::Stack<>()));

/// The line model of the seed: one weight, 1.0, no bias.
inline torch::nn::Linear unit_model() {
  torch::nn::Linear model(torch::nn::LinearOptions(1, 1).bias(false));
  torch::NoGradGuard no_grad;
  model->weight.fill_(1.0);
  return model;
}

/// This process's CPUs, "0,1,...".
inline std::string affinity_string() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out += (out.empty() ? "" : ",") + std::to_string(c);
  }
  return out;
}

/// The subclass API's trainer of the line model; `mode` (the program's argv[1]) picks how it fails or
/// what rank 0 reports.
class LineNano : public nano::TorchNano {
 public:
  using TorchNano::TorchNano;
  torch::nn::Linear model = unit_model();
  std::string mode;

  void train() override {
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.5));
    setup(model, optimizer);
    auto loader = setup_dataloader(LineData().map(torch::data::transforms::Stack<>()), 2);
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (auto& batch : *loader) {
        optimizer.zero_grad();
        auto loss = torch::nn::functional::mse_loss(model(batch.data), batch.target);
        const char* attempt = std::getenv("NANO_RESTART_COUNT");
        if (mode == "a-restart" && rank() == 1 && attempt && std::string(attempt) == "0") {
          std::cerr << "rank 1 is failing on purpose in the first attempt" << std::endl;
          raise(SIGKILL);
        }
        if (mode == "a-fail" && rank() == 1) {
          std::cerr << "rank 1 is failing on purpose" << std::endl;
          raise(SIGKILL);
        }
        backward(loss);
        optimizer.step();
      }
    }
    print0("rank 0 trained w = ", model->weight.item<double>());
    if (mode == "affinity") {
      // Rank 0 collects every rank's CPU list: "0's cpus;1's cpus".
      auto mine = affinity_string();
      std::vector<double> cpu = {mine.empty() ? -1.0 : std::stod(mine)};
      auto all = world().comm->gather(cpu);
      if (is_main()) {
        std::string joined;
        for (double c : all) joined += (joined.empty() ? "" : ";") + std::to_string(int(c));
        set_result(joined);
      }
      return;
    }
    set_result(model->weight.item<double>());
  }
};

}  // namespace nano::test
