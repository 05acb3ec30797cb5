// torch_nano_test's modes and main: `torch_nano_test MODE [BACKEND [WHAT]]`. `unit` runs the
// doctest tables (torch_nano_test.cc); every other mode is a real in-program launch (this
// program re-executed as ranks) that checks its outcome in the caller and exits 0 when
// everything matched, 1 (with a message) otherwise.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <torch/data.h>
#include <torch/data/datasets/tensor.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <nano/nano_wrapper.h>
#include <nano/torch_nano.h>
#include "tests/runtime/torch_nano_line.h"

namespace {

using nano::test::Data;
using nano::test::LineData;
using nano::test::LineNano;
using nano::test::unit_model;

int env_rank() {
  const char* r = std::getenv("RANK");
  return r ? std::atoi(r) : 0;
}

int fail(const std::string& message) {
  std::cerr << "FAIL: " << message << std::endl;
  return 1;
}

// ---- A: the subclass API (LineNano is in torch_nano_line.h) ----

// Batch balancing through TorchNano's own wiring (setup_dataloader + setup's DDP): rank 1
// sleeps 60x longer per sample (enough to dominate even on cores busy with other tests), so
// rank 0 must get bigger batches, and after every backward the gradient must still be the
// mean over the whole global batch. Rank 0 reports
// "largest <its largest batch> worst <largest gradient error>".
class BalanceNano : public nano::TorchNano {
 public:
  using TorchNano::TorchNano;
  torch::nn::Linear model{torch::nn::LinearOptions(1, 1)};

  void train() override {
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
    setup(model, optimizer);
    auto x = torch::linspace(0, 1, 512).unsqueeze(1);
    auto rows = torch::cat({x, 2 * x + 1 + 0.1 * torch::sin(9 * x)}, 1);
    auto loader = setup_dataloader(
        torch::data::datasets::TensorDataset(rows).map(torch::data::transforms::Stack<torch::data::TensorExample>()),
        8);
    int64_t largest = 0;
    double worst = 0;
    for (auto& batch : *loader) {
      const int64_t b = batch.data.size(0);
      std::this_thread::sleep_for(std::chrono::microseconds(rank() == 1 ? 3000 : 50) * b);
      auto xb = batch.data.narrow(1, 0, 1), yb = batch.data.narrow(1, 1, 1);
      optimizer.zero_grad();
      backward(torch::nn::functional::mse_loss(model(xb), yb));
      torch::NoGradGuard no_grad;
      auto err = model(xb) - yb;
      auto sums = torch::stack({(err * xb).sum(), err.sum(), torch::tensor(static_cast<float>(b))}).to(torch::kDouble);
      world().comm->all_reduce(sums, nano::ReduceOp::kSum);
      const double n = sums[2].item<double>();
      worst = std::max({worst, std::abs(model->weight.grad().item<double>() - 2 * sums[0].item<double>() / n),
                        std::abs(model->bias.grad().item<double>() - 2 * sums[1].item<double>() / n)});
      optimizer.step();
      largest = std::max(largest, b);
    }
    if (is_main()) set_result("largest " + std::to_string(largest) + " worst " + std::to_string(worst));
  }
};

int run_a_balance() {
  BalanceNano trainer({.num_processes = 2});
  trainer.train();
  if (!trainer.is_caller()) return 0;
  const auto report = trainer.result<std::string>();
  std::cout << "rank 0: " << report << std::endl;
  long largest = 0;
  double worst = 1;
  if (std::sscanf(report.c_str(), "largest %ld worst %lf", &largest, &worst) != 2) return fail("report " + report);
  if (largest <= 8) return fail("rank 0 never took more than its equal share: " + report);
  if (worst > 1e-5) return fail("a gradient differs from the global batch's mean: " + report);
  return 0;
}

// A rank of an elastic world that keeps the global batch of a first world of 4 (the test exports
// NANO_BATCH_WORLD_SIZE=4, as nano-run --batch-policy global does after a shrink): 2 ranks take
// 16 samples each of a loader written for 8, and auto_lr's target is 4 x the rate.
class BatchPolicyNano : public nano::TorchNano {
 public:
  using TorchNano::TorchNano;
  torch::nn::Linear model{torch::nn::LinearOptions(1, 1)};

  void train() override {
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
    setup(model, optimizer);
    auto rows = torch::linspace(0, 1, 256).unsqueeze(1).repeat({1, 2});
    auto loader = setup_dataloader(
        torch::data::datasets::TensorDataset(rows).map(torch::data::transforms::Stack<torch::data::TensorExample>()),
        8);
    int64_t batch = 0;
    for (auto& b : *loader) {
      batch = std::max<int64_t>(batch, b.data.size(0));
      optimizer.zero_grad();
      backward(torch::nn::functional::mse_loss(model(b.data.narrow(1, 0, 1)), b.data.narrow(1, 1, 1)));
      optimizer.step();
    }
    const double lr = static_cast<torch::optim::SGDOptions&>(optimizer.param_groups()[0].options()).lr();
    if (is_main()) set_result("batch " + std::to_string(batch) + " lr " + std::to_string(lr));
  }
};

int run_a_batch_policy() {
  nano::AutoLrOptions lr;
  lr.warmup_steps = 2;
  BatchPolicyNano trainer({.num_processes = 2, .auto_lr = lr, .balance_batches = false});
  trainer.train();
  if (!trainer.is_caller()) return 0;
  const auto report = trainer.result<std::string>();
  std::cout << "rank 0: " << report << std::endl;
  return report == "batch 16 lr 0.400000" ? 0 : fail("expected batch 16 lr 0.400000, got " + report);
}

nano::TorchNanoOptions options_for(const std::string& backend) {
  return {.num_processes = 2, .distributed_backend = backend, .auto_lr = false};
}

int run_a_equiv(const std::string& backend) {
  LineNano trainer(options_for(backend));
  trainer.mode = "a-equiv";
  trainer.train();
  if (!trainer.is_caller()) return 0;  // a launched rank ends when `trainer` dies
  const double w = trainer.model->weight.item<double>();
  const double r = trainer.result<double>();
  std::cout << "caller: w = " << w << ", result = " << r << std::endl;
  if (w != 0.25) return fail("caller's model w = " + std::to_string(w) + ", expected 0.25");
  if (r != 0.25) return fail("rank 0's result = " + std::to_string(r) + ", expected 0.25");
  return 0;
}

// Under nano-run: every rank joins the outer world, trains and keeps its own result.
int run_a_external() {
  LineNano trainer(options_for("subprocess"));
  trainer.mode = "a-external";
  trainer.train();
  const double w = trainer.model->weight.item<double>();
  std::cout << "rank " << env_rank() << " of the outer world: w = " << w << std::endl;
  if (trainer.is_caller()) return fail("a rank of nano-run thinks it is the caller");
  return w == 0.25 ? 0 : fail("w = " + std::to_string(w) + ", expected 0.25");
}

int run_a_fail() {
  LineNano trainer(options_for("subprocess"));
  trainer.mode = "a-fail";
  try {
    trainer.train();
  } catch (const nano::RankFailedError& e) {
    std::cout << "caught: " << e.what() << " | tail: " << e.stderr_tail() << std::endl;
    if (e.what() != "nano: rank 1 (host " + e.host() + ") was killed by SIGKILL") return fail(e.what());
    if (e.rank() != 1 || e.signal() != SIGKILL || e.exit_code() != 0) return fail("fields");
    if (e.launch_exit_code() != 128 + SIGKILL) return fail("launch exit code");
    if (e.stderr_tail().find("rank 1 is failing on purpose") == std::string::npos) {
      return fail("stderr tail lacks the rank's last line: " + e.stderr_tail());
    }
    return 0;
  }
  return fail("no RankFailedError");
}

// max_restarts: rank 1 dies in the first attempt; the second one trains to the end and the
// caller gets its result, with no RankFailedError.
int run_a_restart() {
  nano::TorchNanoOptions options = options_for("subprocess");
  options.max_restarts = 1;
  LineNano trainer(options);
  trainer.mode = "a-restart";
  trainer.train();
  if (!trainer.is_caller()) return 0;
  const double w = trainer.result<double>();
  std::cout << "after one restart: w = " << w << std::endl;
  // The second attempt trains from the start: the same weight as a run that never failed.
  return w == 0.25 ? 0 : fail("w = " + std::to_string(w) + " after a restart, expected 0.25");
}

int run_affinity() {
  LineNano trainer({.num_processes = 2, .cpu_for_each_process = {{1}, {0}}, .auto_lr = false});
  trainer.mode = "affinity";
  trainer.train();
  if (!trainer.is_caller()) return 0;
  const auto cpus = trainer.result<std::string>();
  std::cout << "ranks' affinity (rank 0;rank 1): " << cpus << std::endl;
  return cpus == "1;0" ? 0 : fail("affinity " + cpus + ", expected 1;0");
}

// ---- B: the wrapper API, on an unchanged training function ----
double training_loop(torch::nn::Linear model, torch::optim::SGD& optimizer, nano::ShardableLoader<Data>& loader,
                     int epochs, torch::nn::MSELoss loss_func) {
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (auto& batch : *loader) {
      optimizer.zero_grad();
      loss_func(model(batch.data), batch.target).backward();
      optimizer.step();
    }
  }
  return model->weight.item<double>();
}

int run_b_equiv(const std::string& backend) {
  auto model = unit_model();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.5));
  nano::ShardableLoader<Data> loader(LineData().map(torch::data::transforms::Stack<>()), 2);
  double w = nano::nano({.num_processes = 2, .distributed_backend = backend, .auto_lr = false})(training_loop)(
      model, optimizer, loader, 2, torch::nn::MSELoss());
  const double caller_w = model->weight.item<double>();
  std::cout << "caller: w = " << caller_w << ", returned = " << w << std::endl;
  if (caller_w != 0.25) return fail("caller's model w = " + std::to_string(caller_w));
  if (w != 0.25) return fail("returned w = " + std::to_string(w));
  return 0;
}

// Arguments in another order, a lambda, a string result; rank 1 throws.
int run_b_fail() {
  auto model = unit_model();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.5));
  nano::ShardableLoader<Data> loader(LineData().map(torch::data::transforms::Stack<>()), 2);
  auto loop = [](int epochs, nano::ShardableLoader<Data>& data, torch::optim::SGD& opt,
                 torch::nn::Linear net) -> std::string {
    for (auto& batch : data) {
      if (env_rank() == 1) throw std::runtime_error("boom on rank 1");
      opt.zero_grad();
      torch::nn::functional::mse_loss(net(batch.data), batch.target).backward();
      opt.step();
    }
    return "epochs " + std::to_string(epochs);
  };
  try {
    nano::nano({.num_processes = 2, .grace_period_ms = 1000})(loop)(2, loader, optimizer, model);
  } catch (const nano::RankFailedError& e) {
    std::cout << "caught: " << e.what() << " | tail: " << e.stderr_tail() << std::endl;
    if (e.what() != "nano: rank 1 (host " + e.host() + ") exited with code 1") return fail(e.what());
    if (e.rank() != 1 || e.exit_code() != 1 || e.signal() != 0) return fail("fields");
    if (e.stderr_tail().find("nano: rank 1: training function failed: boom on rank 1") == std::string::npos) {
      return fail("stderr tail: " + e.stderr_tail());
    }
    return 0;
  }
  return fail("no RankFailedError");
}

// auto_lr through the wrapper: warm-up over 2 steps on 2 ranks; 4 steps of one epoch each.
// The rate used at step k is 0.1 * (1 + min(k, 2) / 2): 0.1, 0.15, 0.2, 0.2.
int run_b_auto_lr() {
  auto model = unit_model();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  nano::ShardableLoader<Data> loader(LineData().map(torch::data::transforms::Stack<>()), 2);
  nano::AutoLrOptions lr;
  lr.warmup_steps = 2;
  auto loop = [](torch::optim::SGD& opt, torch::nn::Linear net, nano::ShardableLoader<Data>& data) {
    for (int epoch = 0; epoch < 4; ++epoch) {
      for (auto& batch : data) {
        opt.zero_grad();
        torch::nn::functional::mse_loss(net(batch.data), batch.target).backward();
        opt.step();
      }
    }
    return net->weight.item<double>();
  };
  const double w = nano::nano({.num_processes = 2, .auto_lr = lr})(loop)(optimizer, model, loader);
  // The averaged gradient is w, so each step multiplies w by (1 - rate).
  const double expected = 0.9 * 0.85 * 0.8 * 0.8;
  std::cout << "auto_lr: w = " << w << ", expected " << expected << std::endl;
  return std::abs(w - expected) < 1e-6 ? 0 : fail("auto_lr w = " + std::to_string(w));
}

// ---- precision, channels_last and the communicator, as the ranks see them ----
// Images 2x6x6 (two channels: a one-channel image is in both layouts at once) with float
// targets; a conv, then a linear layer.
struct ImageData : torch::data::datasets::Dataset<ImageData> {
  torch::data::Example<> get(std::size_t i) override {
    return {torch::rand({2, 6, 6}) + static_cast<float>(i) / 8, torch::full({1}, static_cast<float>(i % 2))};
  }
  torch::optional<std::size_t> size() const override { return 8; }
};
using ImageBatches = decltype(ImageData().map(torch::data::transforms::Stack<>()));

struct ConvNetImpl : torch::nn::Module {
  ConvNetImpl() {
    torch::manual_seed(5);
    conv = register_module("conv", torch::nn::Conv2d(torch::nn::Conv2dOptions(2, 2, 3)));
    fc = register_module("fc", torch::nn::Linear(2 * 4 * 4, 1));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc(conv(x).flatten(1)); }
  torch::nn::Conv2d conv{nullptr};
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ConvNet);

// What a rank sees in one training step under `o`: "" when it is what the options promise, else
// the first difference.
std::string check_step(const nano::TorchNanoOptions& o, ConvNet& net, const torch::data::Example<>& batch,
                       torch::optim::SGD& optimizer, const std::string& comm) {
  const bool wide = o.precision == "64", mixed = o.precision == "bf16";
  const auto weights = wide ? torch::kDouble : torch::kFloat;
  if (batch.data.scalar_type() != weights) return "batch dtype " + std::string(c10::toString(batch.data.scalar_type()));
  if (batch.target.scalar_type() != weights) return "target dtype";
  if (o.channels_last != batch.data.is_contiguous(torch::MemoryFormat::ChannelsLast)) return "batch layout";
  if (o.channels_last && !net->conv->weight.is_contiguous(torch::MemoryFormat::ChannelsLast))
    return "conv weight not channels-last";
  if (o.channels_last && net->conv->weight.is_contiguous()) return "conv weight contiguous";
  const auto h = net->conv(batch.data);
  if (h.scalar_type() != (mixed ? torch::kBFloat16 : weights))
    return "conv output " + std::string(c10::toString(h.scalar_type()));
  optimizer.zero_grad();
  auto out = net->forward(batch.data);
  if (out.scalar_type() != (mixed ? torch::kBFloat16 : weights)) return "linear output";
  auto loss = torch::nn::functional::mse_loss(out, batch.target);
  if (loss.scalar_type() != weights) return "loss " + std::string(c10::toString(loss.scalar_type()));
  loss.backward();
  optimizer.step();
  for (auto& p : net->parameters()) {
    if (p.scalar_type() != weights || p.grad().scalar_type() != weights) return "a weight or gradient changed dtype";
  }
  if (!comm.empty() && o.communicator != "auto" && comm != o.communicator) return "communicator " + comm;
  return "";
}

class PrecisionNano : public nano::TorchNano {
 public:
  using TorchNano::TorchNano;
  ConvNet net;
  void train() override {
    torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.1));
    setup(net, optimizer);
    auto loader = setup_dataloader(ImageData().map(torch::data::transforms::Stack<>()), 2);
    std::string why;
    for (auto& batch : *loader)
      if (why.empty()) why = check_step(options(), net, batch, optimizer, world().comm->name());
    if (is_main()) set_result(why.empty() ? std::string("ok") : why);
  }
};

nano::TorchNanoOptions precision_options(const std::string& what, const std::string& backend) {
  nano::TorchNanoOptions o;
  o.num_processes = 2;
  o.distributed_backend = backend;
  o.auto_lr = false;
  if (what == "bf16" || what == "64") o.precision = what;
  if (what == "cl") o.channels_last = true;
  if (what == "gloo") o.communicator = "gloo";
  return o;
}

// The caller's model after the ranks: in the ranks' dtype and layout, holding their weights.
int check_caller(const std::string& api, const std::string& what, const std::string& result, ConvNet& net) {
  std::cout << api << " " << what << ": rank 0 says " << result << std::endl;
  if (result != "ok") return fail(api + " " + what + ": " + result);
  if (net->fc->weight.scalar_type() != (what == "64" ? torch::kDouble : torch::kFloat))
    return fail("the caller's model is not in the ranks' dtype");
  if (what == "cl" && !net->conv->weight.is_contiguous(torch::MemoryFormat::ChannelsLast))
    return fail("the caller's conv weight is not channels-last");
  ConvNet untrained;
  if (torch::equal(net->fc->weight.to(torch::kFloat), untrained->fc->weight))
    return fail("the caller's model did not get the trained weights");
  return 0;
}

int run_a_precision(const std::string& what, const std::string& backend) {
  PrecisionNano trainer(precision_options(what, backend));
  trainer.train();
  if (!trainer.is_caller()) return 0;
  return check_caller("TorchNano", what, trainer.result<std::string>(), trainer.net);
}

int run_b_precision(const std::string& what, const std::string& backend) {
  ConvNet net;
  torch::optim::SGD optimizer(net->parameters(), torch::optim::SGDOptions(0.1));
  nano::ShardableLoader<ImageBatches> loader(ImageData().map(torch::data::transforms::Stack<>()), 2);
  const nano::TorchNanoOptions o = precision_options(what, backend);
  auto loop = [&o](ConvNet model, torch::optim::SGD& opt, nano::ShardableLoader<ImageBatches>& data) {
    std::string why;
    for (auto& batch : data)  // (the function sees no world: the communicator is TorchNano's case)
      if (why.empty()) why = check_step(o, model, batch, opt, "");
    return why.empty() ? std::string("ok") : why;
  };
  const std::string result = nano::nano(o)(loop)(net, optimizer, loader);
  return check_caller("nano()", what, result, net);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "unit";
  const std::string backend = argc > 2 ? argv[2] : "subprocess";
  try {
    if (mode == "unit") {
      doctest::Context context;
      context.applyCommandLine(argc - 1, argv + 1);
      return context.run();
    }
    if (mode == "a-equiv") return run_a_equiv(backend);
    if (mode == "a-external") return run_a_external();
    if (mode == "a-fail") return run_a_fail();
    if (mode == "affinity") return run_affinity();
    if (mode == "a-restart") return run_a_restart();
    if (mode == "a-balance") return run_a_balance();
    if (mode == "a-batch-policy") return run_a_batch_policy();
    if (mode == "b-equiv") return run_b_equiv(backend);
    if (mode == "b-fail") return run_b_fail();
    if (mode == "b-auto-lr") return run_b_auto_lr();
    if (mode == "a-precision" && argc > 3) return run_a_precision(argv[3], backend);
    if (mode == "b-precision" && argc > 3) return run_b_precision(argv[3], backend);
  } catch (const std::exception& e) {
    return fail(std::string("uncaught: ") + e.what());
  }
  return fail("unknown mode " + mode);
}
