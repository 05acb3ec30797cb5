// Tests of nano::TorchNano and nano::nano(): one program, modes chosen by argv[1], so only
// one executable links torch. `unit` runs the doctest tables; every other mode is a real
// in-program launch (this program re-executed as ranks) that checks its outcome in the
// caller and exits 0 when everything matched, 1 (with a message) otherwise.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

#include <torch/data.h>
#include <torch/data/datasets/tensor.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <nano/nano_wrapper.h>
#include <nano/torch_nano.h>
#include "core/setting_list.h"
#include "runtime/in_program_launch.h"
#include "runtime/in_program_options.h"
#include "runtime/in_program_report.h"

namespace {

// The seed's equivalence data: x = [0, 0, 1, 1], targets 0.
struct LineData : torch::data::datasets::Dataset<LineData> {
  torch::data::Example<> get(std::size_t i) override {
    const float x[] = {0, 0, 1, 1};
    return {torch::full({1}, x[i]), torch::zeros({1})};
  }
  torch::optional<std::size_t> size() const override { return 4; }
};
using Data = decltype(LineData().map(torch::data::transforms::Stack<>()));

torch::nn::Linear unit_model() {
  torch::nn::Linear model(torch::nn::LinearOptions(1, 1).bias(false));
  torch::NoGradGuard no_grad;
  model->weight.fill_(1.0);
  return model;
}

int env_rank() {
  const char* r = std::getenv("RANK");
  return r ? std::atoi(r) : 0;
}

std::string affinity_string() {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  std::string out;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) out += (out.empty() ? "" : ",") + std::to_string(c);
  }
  return out;
}

int fail(const std::string& message) {
  std::cerr << "FAIL: " << message << std::endl;
  return 1;
}

// ---- A: the subclass API ----
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

// ---- unit tables (no processes) ----
namespace {
// TorchNanoOptions' value, other than its default, for one setting of core/setting_list.h, and the
// LaunchOptions value it stands for, by the fields' types.
void sample(bool& program, bool& launch) { program = launch = true; }
void sample(std::string& program, std::string& launch) { program = launch = "given/value"; }
void sample(int& program, int& launch) { program = launch = 7; }
void sample(int& program_ms, std::chrono::milliseconds& launch) {
  program_ms = 2500;
  launch = std::chrono::milliseconds(2500);
}
}  // namespace

TEST_CASE("every setting of core/setting_list.h reaches LaunchOptions from TorchNanoOptions") {
  int rows = 0;
#define NANO_CHECK_FIELD(id, key, flag, field, member, metavar, docs, help)                \
  {                                                                                        \
    CAPTURE(#field);                                                                       \
    nano::TorchNanoOptions o;                                                              \
    nano::LaunchOptions expected;                                                          \
    sample(o.field, expected.member);                                                      \
    CHECK_FALSE(expected.member == nano::LaunchOptions{}.member);                          \
    CHECK(nano::in_program::launch_options_of(o).member == expected.member);               \
    CHECK(nano::in_program::launch_options_of({}).member == nano::LaunchOptions{}.member); \
    CHECK(nano::program_field(nano::Setting::id) == #field);                               \
    ++rows;                                                                                \
  }
  NANO_SHARED_SETTINGS(NANO_CHECK_FIELD)
#undef NANO_CHECK_FIELD
  CHECK(rows == static_cast<int>(std::size(nano::kSharedSettingFields)));
}

TEST_CASE("bad options are one-line usage errors, naming TorchNanoOptions' fields") {
  using nano::in_program::launch_options_of;
  using nano::in_program::prepare_self;
  using nano::in_program::program_message;
  nano::TorchNanoOptions o;
  o.num_processes = 2;
  o.oversubscribe = true;  // a 1-core machine still plans 2 ranks
  CHECK_NOTHROW(prepare_self(launch_options_of(o), false));
  CHECK(launch_options_of(o).plan.num_processes == 2);
  CHECK(launch_options_of(o).front_end == nano::FrontEnd::kProgram);
  // What the caller reads for `bad`: the translation's or the launch's own check, worded once.
  auto message = [](const nano::TorchNanoOptions& bad) -> std::string {
    try {
      prepare_self(launch_options_of(bad), false);
    } catch (const nano::UsageError& e) {
      return program_message(e);
    }
    return "";
  };
  struct Row {
    void (*change)(nano::TorchNanoOptions&);
    std::string message;
  };
  const std::vector<Row> table = {
      {[](nano::TorchNanoOptions& b) { b.num_processes = 0; }, "nano: num_processes must be at least 1, got 0"},
      {[](nano::TorchNanoOptions& b) { b.num_processes = -2; }, "nano: num_processes must be at least 1, got -2"},
      {[](nano::TorchNanoOptions& b) {
         b.num_processes = -3;  // with hosts too, where the planner only sees each host's share
         b.distributed_backend = "mpi";
         b.hosts = "a:2,b:2";
       },
       "nano: num_processes must be at least 1, got -3"},
      {[](nano::TorchNanoOptions& b) { b.distributed_backend = "fork"; },
       "nano: distributed_backend \"fork\" is not supported (forking after libtorch has started its thread pools "
       "is unsafe); use \"subprocess\" or \"mpi\""},
      {[](nano::TorchNanoOptions& b) { b.distributed_backend = "ray"; },
       "nano: unknown distributed_backend \"ray\": expected \"subprocess\" or \"mpi\""},
      {[](nano::TorchNanoOptions& b) { b.hosts = "a:2"; },
       "nano: hosts needs the mpi backend, not distributed_backend subprocess"},
      {[](nano::TorchNanoOptions& b) { b.hostfile = "hf"; },
       "nano: hostfile needs the mpi backend, not distributed_backend subprocess"},
      {[](nano::TorchNanoOptions& b) { b.grace_period_ms = -1; },
       "nano: grace_period_ms must be at least 0, got -1 ms"},
      {[](nano::TorchNanoOptions& b) { b.max_restarts = -1; }, "nano: max_restarts must be at least 0, got -1"},
      {[](nano::TorchNanoOptions& b) { b.restart_delay_ms = -5; },
       "nano: restart_delay_ms must be at least 0, got -5 ms"},
      {[](nano::TorchNanoOptions& b) { b.heartbeat_timeout_ms = 500; },
       "nano: heartbeat_timeout_ms must be at least 1 s, got 500 ms"},
      // The planner's errors name the fields too (not nano-run's flags).
      {[](nano::TorchNanoOptions& b) { b.cpu_for_each_process = {{0}}; },
       "nano: cpu_for_each_process gives 1 list but num_processes is 2"},
      {[](nano::TorchNanoOptions& b) {
         b.cpu_for_each_process = {{0}, {}};
       },
       "nano: cpu_for_each_process: the CPU list of rank 1 is empty"},
      {[](nano::TorchNanoOptions& b) {
         b.cpu_for_each_process = {{-2}, {0}};
       },
       "nano: cpu_for_each_process: CPU -2 does not exist on this machine"},
  };
  for (const Row& row : table) {
    CAPTURE(row.message);
    auto bad = o;
    row.change(bad);
    CHECK(message(bad) == row.message);
  }
  auto many = o;
  many.oversubscribe = false;
  many.num_processes = 100000;
  CHECK(message(many).rfind("nano: num_processes 100000 is more than the", 0) == 0);
}

TEST_CASE("the report rank 0 hands back: names, tensors, optimizers' bytes and every kind of result") {
  using nano::in_program::Report;
  char path[] = "/tmp/nano-report-test-XXXXXX";
  const int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  close(fd);
  const std::vector<nano::TrainResult> results = {std::monostate{}, 0.5, int64_t{-7}, std::string("done"),
                                                  at::arange(3, at::kFloat)};
  for (const nano::TrainResult& result : results) {
    CAPTURE(nano::detail::result_kind(result));
    Report report;
    report.names = {"p:fc.weight", "b:bn.running_mean"};
    report.tensors = {at::ones({2, 2}), at::zeros({3}, at::kDouble)};
    report.optimizer_states = {std::string("\0bytes\n", 7), ""};
    report.result = result;
    nano::in_program::write_report(path, report);
    const Report back = nano::in_program::read_report(path);
    CHECK(back.names == report.names);
    REQUIRE(back.tensors.size() == 2);
    CHECK(back.tensors[0].equal(report.tensors[0]));
    CHECK(back.tensors[1].dtype() == at::kDouble);
    CHECK(back.optimizer_states == report.optimizer_states);
    CHECK(std::string(nano::detail::result_kind(back.result)) == nano::detail::result_kind(result));
    if (auto* t = std::get_if<at::Tensor>(&result)) CHECK(std::get<at::Tensor>(back.result).equal(*t));
    if (auto* d = std::get_if<double>(&result)) CHECK(std::get<double>(back.result) == *d);
    if (auto* i = std::get_if<int64_t>(&result)) CHECK(std::get<int64_t>(back.result) == *i);
    if (auto* text = std::get_if<std::string>(&result)) CHECK(std::get<std::string>(back.result) == *text);
  }
  std::remove(path);
  CHECK_THROWS_WITH_AS(nano::in_program::read_report(path), doctest::Contains("rank 0 finished without reporting"),
                       nano::Error);
}

TEST_CASE("in a program, a bad option is a UsageError with nano's prefix before anything starts") {
  LineNano trainer({.num_processes = 2, .cpu_for_each_process = {{0}}, .auto_lr = false});
  CHECK_THROWS_WITH_AS(trainer.train(), "nano: cpu_for_each_process gives 1 list but num_processes is 2",
                       nano::UsageError);
  LineNano zero({.num_processes = 0});
  CHECK_THROWS_WITH_AS(zero.train(), "nano: num_processes must be at least 1, got 0", nano::UsageError);
}

TEST_CASE("the command line is split at NULs") {
  using nano::in_program::split_cmdline;
  const std::vector<std::string> expected{"prog", "a b", "", "c"};
  CHECK(split_cmdline(std::string("prog\0a b\0\0c\0", 12)) == expected);
  CHECK(split_cmdline("").empty());
}

TEST_CASE("role from the environment") {
  using nano::in_program::Role;
  using nano::in_program::role_from_env;
  CHECK(role_from_env({}) == Role::kCaller);
  CHECK(role_from_env({{"NANO_IN_PROGRAM", "1"}}) == Role::kCaller);
  CHECK(role_from_env({{"RANK", "0"}, {"WORLD_SIZE", "2"}}) == Role::kExternalRank);
  CHECK(role_from_env({{"OMPI_COMM_WORLD_RANK", "1"}}) == Role::kExternalRank);
  CHECK(role_from_env({{"RANK", "1"}, {"NANO_IN_PROGRAM", "1"}}) == Role::kLaunchedRank);
}

TEST_CASE("results convert by kind, a wrong kind is an error") {
  using nano::detail::from_result;
  using nano::detail::to_result;
  CHECK(from_result<double>(to_result(0.25)) == 0.25);
  CHECK(from_result<int>(to_result(7)) == 7);
  CHECK(from_result<std::string>(to_result(std::string("ok"))) == "ok");
  CHECK(from_result<at::Tensor>(to_result(torch::ones({2}))).sum().item<double>() == 2.0);
  CHECK_THROWS_WITH_AS(from_result<double>(to_result(std::string("x"))),
                       "nano: rank 0's result is string, not the type asked for (double)", nano::Error);
  CHECK_THROWS_WITH_AS(from_result<double>(nano::TrainResult{}),
                       "nano: rank 0's result is nothing, not the type asked for (double)", nano::Error);
}

TEST_CASE("argument kinds are recognised at compile time") {
  using nano::detail::is_model_v;
  using nano::detail::is_optimizer_v;
  using nano::detail::is_torch_loader_v;
  static_assert(is_model_v<torch::nn::Linear>);
  static_assert(is_model_v<torch::nn::Linear&>);
  static_assert(is_model_v<std::shared_ptr<torch::nn::LinearImpl>>);
  static_assert(!is_model_v<torch::nn::MSELoss&>);  // a loss module, not the model
  static_assert(!is_model_v<std::shared_ptr<torch::nn::CrossEntropyLossImpl>>);
  static_assert(!is_model_v<int>);
  static_assert(is_optimizer_v<torch::optim::SGD&>);
  static_assert(is_optimizer_v<std::shared_ptr<torch::optim::SGD>>);
  static_assert(!is_optimizer_v<torch::nn::Linear>);
  static_assert(nano::detail::is_shardable_loader_v<nano::ShardableLoader<Data>&>);
  using TorchLoader = decltype(torch::data::make_data_loader(LineData().map(torch::data::transforms::Stack<>()), 2));
  static_assert(is_torch_loader_v<TorchLoader&>);
  static_assert(!is_torch_loader_v<nano::ShardableLoader<Data>>);
  CHECK(true);
}

TEST_CASE("a bad precision or communicator is one line naming the field, before anything starts") {
  struct Row {
    nano::TorchNanoOptions options;
    std::string error;
  };
  for (const Row& r : std::vector<Row>{
           {{.num_processes = 2, .precision = "16"},
            "nano: precision \"16\" (float16) is not supported on CPUs: use \"bf16\", the half-width type CPUs "
            "compute in"},
           {{.num_processes = 2, .precision = "fp64"},
            "nano: unknown precision \"fp64\": expected \"32\", \"64\" or \"bf16\""},
           {{.num_processes = 2, .communicator = "nccl"},
            "nano: unknown communicator \"nccl\": expected \"auto\", \"mpi\" or \"gloo\""},
           {{.num_processes = 2, .communicator = "mpi"},
            "nano: communicator \"mpi\" needs distributed_backend \"mpi\" (MPI ranks are started by mpirun), got "
            "\"subprocess\""},
       }) {
    CAPTURE(r.error);
    // The first three from the constructor, the last from the launch's own check.
    CHECK_THROWS_WITH_AS(LineNano(r.options).train(), r.error.c_str(), nano::UsageError);
  }
}

TEST_CASE("bad options throw before anything starts") {
  LineNano trainer({.num_processes = 2, .distributed_backend = "fork"});
  CHECK_THROWS_WITH_AS(trainer.train(), doctest::Contains("nano: distributed_backend \"fork\" is not supported"),
                       nano::UsageError);
}

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
