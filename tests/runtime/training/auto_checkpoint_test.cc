// Checkpoints of in-program training (TorchNano's and nano::nano()'s checkpoint_dir) with real
// launches: this program re-executed as ranks, killed on purpose, restarted and resumed.
//
//   auto_checkpoint_test exact API BACKEND   a run whose rank 1 is SIGKILLed at step 13 and
//                                            restarted (max_restarts 1) ends with the same
//                                            weights, bit for bit, and the same optimizer state
//                                            in the caller as a run that never failed
//   auto_checkpoint_test world               saved by 2 ranks, resumed by 3 and by 1: every
//                                            sample of the interrupted epoch is seen once
//   auto_checkpoint_test precision           a folder written in precision "64" is refused, in
//                                            one line, by a run in "32" and by one in "bf16"
// NANO_TEST_PRECISION (32, 64, bf16; default 32) is the runs' TorchNanoOptions::precision, so
// `exact` also checks bit-exact resumption in each precision.
//   auto_checkpoint_test run API BACKEND DIR N KILL RESTARTS BALANCE LOG
//                                            one training (what the modes above start)
// API: a (TorchNano) or b (nano::nano()). Exits 0 when everything matched, else 1 with a line.
#include <signal.h>
#include <unistd.h>

#include <torch/data.h>
#include <torch/data/datasets/tensor.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nano/nano_wrapper.h>
#include <nano/torch_nano.h>

namespace fs = std::filesystem;

namespace {

constexpr int kSamples = 48;  // divisible by 1, 2 and 3 ranks x 4: no padding in any world
constexpr int kBatch = 4;
constexpr int kEpochs = 3;

int fail(const std::string& message) {
  std::cerr << "FAIL: " << message << std::endl;
  return 1;
}

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : 0;
}

// Rows [index, target]: the loader hands out sample indices, so the ranks can log them.
auto dataset() {
  auto index = torch::arange(kSamples, torch::kFloat).unsqueeze(1);
  auto rows = torch::cat({index, 0.5 * index / kSamples - 0.2}, 1);
  return torch::data::datasets::TensorDataset(rows).map(torch::data::transforms::Stack<torch::data::TensorExample>());
}
using Data = decltype(dataset());

struct RunSpec {
  std::string backend = "subprocess", dir, log;
  int processes = 2, kill_step = -1, restarts = 0;
  bool balance = false;
};

nano::TorchNanoOptions options_of(const RunSpec& s) {
  nano::TorchNanoOptions o;
  o.num_processes = s.processes;
  o.distributed_backend = s.backend;
  o.oversubscribe = true;  // 3 ranks on a 2-core machine
  nano::AutoLrOptions lr;
  lr.warmup_steps = 4;
  o.auto_lr = lr;
  o.max_restarts = s.restarts;
  o.grace_period_ms = 1000;
  o.balance_batches = s.balance;
  o.checkpoint_dir = s.dir;
  o.checkpoint_every_steps = 5;
  if (const char* precision = std::getenv("NANO_TEST_PRECISION")) o.precision = precision;
  return o;
}

torch::nn::Linear make_model() {
  torch::manual_seed(3);
  return torch::nn::Linear(1, 1);
}

torch::optim::SGD make_optimizer(torch::nn::Linear& model) {
  return torch::optim::SGD(model->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
}

// The training loop both APIs run, unchanged between a first run and a resumed one. Each rank
// logs "epoch step index" per sample; rank 1 SIGKILLs itself at step `kill` of attempt 0.
template <class Loader>
std::string train_loop(torch::nn::Linear& model, torch::optim::SGD& optimizer, Loader& loader, int rank,
                       const RunSpec& spec) {
  std::ofstream log;
  if (!spec.log.empty()) {
    log.open(spec.log + "-n" + std::to_string(spec.processes) + "-r" + std::to_string(rank) + "-a" +
             std::to_string(env_int("NANO_RESTART_COUNT")));
  }
  int step = 0;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    for (auto& batch : loader) {
      if (rank == 1 && step == spec.kill_step && env_int("NANO_RESTART_COUNT") == 0) raise(SIGKILL);
      auto index = batch.data.narrow(1, 0, 1);
      for (int64_t i = 0; i < index.size(0); ++i) log << epoch << " " << step << " " << index[i].item().toInt() << "\n";
      log.flush();
      optimizer.zero_grad();
      auto loss = torch::nn::functional::mse_loss(model(index / kSamples), batch.data.narrow(1, 1, 1));
      loss.backward();
      optimizer.step();
      ++step;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  char text[160];
  std::snprintf(text, sizeof text, "w %a b %a", model->weight.item<double>(), model->bias.item<double>());
  return text;
}

class CheckpointNano : public nano::TorchNano {
 public:
  CheckpointNano(const RunSpec& spec) : TorchNano(options_of(spec)), spec_(spec) {}
  torch::nn::Linear model = make_model();
  torch::optim::SGD optimizer = make_optimizer(model);

  void train() override {
    setup(model, optimizer);
    if (is_caller()) return;  // the ranks have trained; `model` and `optimizer` hold rank 0's state
    auto loader = setup_dataloader(dataset(), kBatch);
    const std::string result = train_loop(model, optimizer, *loader, rank(), spec_);
    if (is_main()) set_result(result);
  }

 private:
  RunSpec spec_;
};

// What the caller got back: rank 0's weights, and its optimizer's learning rate and momentum.
std::string caller_state(torch::nn::Linear& model, torch::optim::SGD& optimizer) {
  auto& group = optimizer.param_groups().at(0);
  const double lr = static_cast<torch::optim::SGDOptions&>(group.options()).lr();
  double momentum = 0;
  int buffers = 0;
  // Every parameter's state (the map's key type differs between libtorch versions).
  for (auto& entry : optimizer.state()) {
    momentum += static_cast<torch::optim::SGDParamState&>(*entry.second).momentum_buffer().sum().item<double>();
    ++buffers;
  }
  char text[200];
  std::snprintf(text, sizeof text, "caller w %a lr %a momentum %a over %d", model->weight.item<double>(), lr, momentum,
                buffers);
  return text;
}

int run_one(const std::string& api, const RunSpec& spec) {
  if (api == "a") {
    CheckpointNano trainer(spec);
    trainer.train();
    if (!trainer.is_caller()) return 0;
    std::cout << "result " << trainer.result<std::string>() << "\n"
              << caller_state(trainer.model, trainer.optimizer) << std::endl;
    return 0;
  }
  auto model = make_model();
  auto optimizer = make_optimizer(model);
  nano::ShardableLoader<Data> loader(dataset(), kBatch);
  auto loop = [&spec](torch::nn::Linear net, torch::optim::SGD& opt, nano::ShardableLoader<Data>& data) {
    return train_loop(net, opt, data, data.rank(), spec);
  };
  const std::string result = nano::nano(options_of(spec))(loop)(model, optimizer, loader);
  std::cout << "result " << result << "\n" << caller_state(model, optimizer) << std::endl;
  return 0;
}

// Runs this program with `args`; returns its output (stdout and stderr) and exit status.
std::pair<std::string, int> run_self(const std::string& args, const std::string& env = "") {
  const std::string command =
      (env.empty() ? "" : "env " + env + " ") + fs::read_symlink("/proc/self/exe").string() + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  const int status = pclose(pipe);
  std::cout << "$ " << args << "\n" << out;
  return {out, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)};
}

std::string line_starting(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(prefix, 0) == 0) return line;
  return "";
}

// The step the resumed run started from ("nano: resuming from checkpoint ... (step N)"), -1 if none.
int resumed_step(const std::string& output) {
  std::smatch m;
  static const std::regex re("resuming from checkpoint .*\\(step ([0-9]+)\\)");
  return std::regex_search(output, m, re) ? std::stoi(m[1]) : -1;
}

fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("nano-auto-ckpt-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

int run_exact(const std::string& api, const std::string& backend) {
  const fs::path root = scratch("exact-" + api);
  const std::string common = "run " + api + " " + backend + " ";
  auto [plain, plain_rc] = run_self(common + (root / "plain").string() + " 2 -1 0 equal -");
  auto [failed, failed_rc] = run_self(common + (root / "failed").string() + " 2 13 1 equal -");
  fs::remove_all(root);
  if (plain_rc != 0 || failed_rc != 0)
    return fail("exit codes " + std::to_string(plain_rc) + " and " + std::to_string(failed_rc));
  const int from = resumed_step(failed);
  if (from <= 0 || from > 13) return fail("the restarted run did not resume from a checkpoint of steps 5..13");
  if (resumed_step(plain) != -1) return fail("the uninterrupted run resumed from something");
  for (const std::string prefix : {"result ", "caller "}) {
    const std::string a = line_starting(plain, prefix), b = line_starting(failed, prefix);
    if (a.empty() || a != b) return fail("'" + a + "' != '" + b + "'");
  }
  // The caller's optimizer holds rank 0's state: warmed-up rate (2 x 0.05) and momentum buffers.
  const std::string caller = line_starting(plain, "caller ");
  if (caller.find("over 2") == std::string::npos) return fail("no momentum came back: " + caller);
  if (caller.find("lr 0x1.999999999999ap-4 ") == std::string::npos) return fail("the rate is not 0.1: " + caller);
  std::cout << "resumed from step " << from << "; final weights and optimizer state equal bit for bit" << std::endl;
  return 0;
}

// Every (epoch, step, index) line of the log files whose names start with `prefix`.
struct Seen {
  int epoch, step, index;
};
std::vector<Seen> read_logs(const fs::path& dir, const std::string& prefix) {
  std::vector<Seen> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename().string().rfind(prefix, 0) != 0) continue;
    std::ifstream in(entry.path());
    for (Seen s; in >> s.epoch >> s.step >> s.index;) out.push_back(s);
  }
  return out;
}

int run_world() {
  const fs::path root = scratch("world");
  const std::string saved = (root / "ckpt").string();
  // Rank 1 of 2 dies at step 13 (epoch 2 of 6-step epochs); no restart: the checkpoints stay.
  auto [first, first_rc] = run_self("run a subprocess " + saved + " 2 13 0 balanced " + (root / "log").string());
  if (first_rc == 0) return fail("the first run should have failed");
  fs::copy(saved, root / "ckpt-copy", fs::copy_options::recursive);
  int failures = 0;
  for (const auto& [ranks, dir] : {std::pair<int, std::string>{3, saved}, {1, (root / "ckpt-copy").string()}}) {
    auto [out, rc] =
        run_self("run a subprocess " + dir + " " + std::to_string(ranks) + " -1 0 balanced " + (root / "log").string());
    const int from = resumed_step(out);
    if (rc != 0 || from <= 0) {
      failures +=
          fail(std::to_string(ranks) + " ranks: exit " + std::to_string(rc) + ", resumed from " + std::to_string(from));
      continue;
    }
    const int epoch = from / (kSamples / (2 * kBatch));  // the interrupted epoch, in the 2-rank run's steps
    std::multiset<int> covered;
    for (const Seen& s : read_logs(root, "log-n2-")) {
      if (s.epoch == epoch && s.step < from) covered.insert(s.index);
    }
    std::map<int, std::multiset<int>> later;  // the resumed run's epochs
    for (const Seen& s : read_logs(root, "log-n" + std::to_string(ranks) + "-")) {
      if (s.epoch < epoch) failures += fail("the resumed run trained on epoch " + std::to_string(s.epoch) + " again");
      if (s.epoch == epoch) covered.insert(s.index);
      if (s.epoch > epoch) later[s.epoch].insert(s.index);
    }
    std::multiset<int> every;
    for (int i = 0; i < kSamples; ++i) every.insert(i);
    if (covered != every) {
      failures += fail(std::to_string(ranks) + " ranks: epoch " + std::to_string(epoch) + " saw " +
                       std::to_string(covered.size()) + " samples across the resume, not each of " +
                       std::to_string(kSamples) + " once");
    }
    for (int e = epoch + 1; e < kEpochs; ++e) {
      if (later[e] != every)
        failures += fail(std::to_string(ranks) + " ranks: epoch " + std::to_string(e) + " is not whole");
    }
    // auto_lr goes on towards this world's multiple of the base rate 0.05 (warm-up done).
    const std::string rate = ranks == 3 ? "lr 0x1.3333333333334p-3 " : "lr 0x1.999999999999ap-5 ";
    if (line_starting(out, "caller ").find(rate) == std::string::npos)
      failures += fail(std::to_string(ranks) + " ranks: not at " + rate + ": " + line_starting(out, "caller "));
    if (failures == 0)
      std::cout << "saved by 2 ranks at step " << from << " (epoch " << epoch << "), resumed by " << ranks
                << ": every sample of the epoch once" << std::endl;
  }
  fs::remove_all(root);
  return failures ? 1 : 0;
}

int run_precision() {
  const fs::path root = scratch("precision");
  const std::string dir = (root / "ckpt").string();
  auto [written, written_rc] = run_self("run a subprocess " + dir + " 2 -1 0 equal -", "NANO_TEST_PRECISION=64");
  int failures = 0;
  if (written_rc != 0) failures += fail("the float64 run failed");
  for (const std::string other : {"32", "bf16"}) {
    auto [out, rc] = run_self("run a subprocess " + dir + " 2 -1 0 equal -", "NANO_TEST_PRECISION=" + other);
    const std::string why = "was written with precision \"64\", and this run has precision \"" + other +
                            "\" (resume with the same precision, or use another folder)";
    if (rc == 0) failures += fail("a run in precision " + other + " resumed a float64 checkpoint");
    if (out.find(why) == std::string::npos) failures += fail("no line saying: " + why);
    if (resumed_step(out) != -1) failures += fail("a run in precision " + other + " said it resumed");
  }
  fs::remove_all(root);
  if (failures == 0) std::cout << "a float64 checkpoint folder is refused by runs in 32 and bf16" << std::endl;
  return failures ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 9 && args[0] == "run") {
      RunSpec spec;
      spec.backend = args[2];
      spec.dir = args[3];
      spec.processes = std::stoi(args[4]);
      spec.kill_step = std::stoi(args[5]);
      spec.restarts = std::stoi(args[6]);
      spec.balance = args[7] == "balanced";
      spec.log = args[8] == "-" ? "" : args[8];
      return run_one(args[1], spec);
    }
    if (args.size() == 3 && args[0] == "exact") return run_exact(args[1], args[2]);
    if (args.size() == 1 && args[0] == "world") return run_world();
    if (args.size() == 1 && args[0] == "precision") return run_precision();
  } catch (const std::exception& e) {
    return fail(std::string("uncaught: ") + e.what());
  }
  return fail("usage: auto_checkpoint_test exact a|b BACKEND | world | precision | run ...");
}
