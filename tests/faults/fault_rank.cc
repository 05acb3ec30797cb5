// The rank program of the fault tests: a small DDP training loop on nano's public API that
// fails on purpose in one of many ways, at one phase, on chosen ranks.
//
//   fault_rank [--steps N] [--fault WAY@PHASE@RANKS] [--pid-dir DIR] [--grandchild]
//              [--on-term-save FILE,SECONDS] [--progress FILE]
// WAY:   throw (caught in main, which returns 1, as user programs do), return (main returns
//        3), exit (std::exit(4)), zero (main returns 0 at once), segv, abort, kill (SIGKILL
//        itself), term (SIGTERM itself), stop (SIGSTOP itself), hang (sleeps for ever).
// PHASE: init (before nano::init), step:K (between the forward and backward of step K, while
//        the other ranks are already inside that step's all-reduce), teardown (after the
//        loop, the communicator still alive), exit (in an atexit handler).
// RANKS: "1" or "0,2". An optional fourth part @A fires only in attempt A of nano-run
// --max-restarts (NANO_RESTART_COUNT = A). --fault may be given several times.
// --checkpoint-dir DIR --checkpoint-every N: track the model, optimizer and step with
// nano::Checkpointer and resume from DIR; --print-weights: rank 0 prints a hash of the final
// weights' bytes ("weights <hex>"), so runs can be compared bit for bit.
// --pid-dir writes DIR/rank-R.pid first (and DIR/grandchild-R.pid with --grandchild, a
// `sleep 300` the rank starts in its own process group, as data loaders and pools do), and
// DIR/fault-R.at when it injects a fault: the monotonic clock's nanoseconds then, so that a test
// bounds the time from the fault itself, not from a start that a loaded machine may delay.
// --slow RANK:MS: rank RANK sleeps MS ms in every step, between the forward and the backward (a
// straggler for the timeline's tests).
// --progress FILE: rank 0 writes "STEP ATTEMPT" to FILE after each step it finished (the
// elastic tests' and benchmark's measure of work lost and of the first step of a new world).
// --on-term-save: on SIGTERM, finish the current step (the ranks agree on which), write
// FILE.R after SECONDS, exit 0.
#include <signal.h>
#include <unistd.h>

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nano/error.h>
#include <nano/nano.h>

namespace {

int env_rank() {
  const char* r = std::getenv("RANK");
  if (!r) r = std::getenv("OMPI_COMM_WORLD_RANK");
  return r ? std::atoi(r) : 0;
}

struct Fault {
  std::string way, phase;
  int step = -1;
  bool mine = false;
};

int restart_count() {
  const char* c = std::getenv("NANO_RESTART_COUNT");
  return c ? std::atoi(c) : 0;
}

Fault parse_fault(const std::string& spec, int rank) {
  Fault f;
  std::stringstream in(spec);
  std::string ranks;
  std::getline(in, f.way, '@');
  std::getline(in, f.phase, '@');
  std::getline(in, ranks, '@');
  std::string attempt;
  const bool any_attempt = !std::getline(in, attempt) || attempt.empty();
  if (f.phase.rfind("step:", 0) == 0) {
    f.step = std::stoi(f.phase.substr(5));
    f.phase = "step";
  }
  std::stringstream list(ranks);
  std::string r;
  while (std::getline(list, r, ','))
    if (!r.empty() && std::stoi(r) == rank) f.mine = true;
  if (!any_attempt && std::stoi(attempt) != restart_count()) f.mine = false;
  return f;
}

std::vector<Fault> g_faults;
std::atomic<bool> g_term{false};
std::string g_pid_dir;

// Does what the fault says, where it says; returns normally only for "throw" (thrown) or a
// way that ends main (then `code` is set).
void strike(const Fault& g_fault, const std::string& phase, int step, int* code) {
  if (!g_fault.mine || g_fault.phase != phase || (phase == "step" && step != g_fault.step)) return;
  std::cerr << "fault_rank: rank " << env_rank() << ": injecting '" << g_fault.way << "' at " << phase
            << (phase == "step" ? " " + std::to_string(step) : "") << std::endl;
  if (!g_pid_dir.empty())
    std::ofstream(g_pid_dir + "/fault-" + std::to_string(env_rank()) + ".at")
        << std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
               .count()
        << "\n";
  const std::string& w = g_fault.way;
  if (w == "throw") throw std::runtime_error("injected failure at " + phase);
  if (w == "return")
    *code = 3;
  else if (w == "zero")
    *code = 0;
  else if (w == "exit")
    std::exit(4);
  else if (w == "segv")
    raise(SIGSEGV);
  else if (w == "abort")
    std::abort();
  else if (w == "kill")
    raise(SIGKILL);
  else if (w == "term")
    raise(SIGTERM);
  else if (w == "stop")
    raise(SIGSTOP);
  else if (w == "hang")
    for (;;) pause();
}

void strike(const std::string& phase, int step, int* code) {
  for (const Fault& f : g_faults) strike(f, phase, step, code);
}

uint64_t weights_hash(torch::nn::Module& m) {
  uint64_t h = 1469598103934665603ULL;
  for (const auto& p : m.parameters()) {
    auto t = p.detach().contiguous();
    const auto* b = static_cast<const unsigned char*>(t.data_ptr());
    for (size_t i = 0; i < t.nbytes(); ++i) h = (h ^ b[i]) * 1099511628211ULL;
  }
  return h;
}

void start_grandchild(const std::string& pid_dir, int rank) {
  pid_t pid = fork();
  if (pid == 0) {
    execlp("sleep", "sleep", "300", static_cast<char*>(nullptr));
    _exit(127);
  }
  if (!pid_dir.empty()) std::ofstream(pid_dir + "/grandchild-" + std::to_string(rank) + ".pid") << pid << "\n";
}

struct Net : torch::nn::Module {
  // 128x128 weights: 64 KiB of gradients, so DDP takes the shared-memory all-reduce path.
  Net()
      : fc1(register_module("fc1", torch::nn::Linear(128, 128))),
        fc2(register_module("fc2", torch::nn::Linear(128, 8))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  int steps = 20;
  std::string pid_dir, save_file, checkpoint_dir, progress_file;
  int checkpoint_every = 0;
  bool print_weights = false;
  double save_seconds = 0;
  bool grandchild = false;
  int slow_rank = -1, slow_ms = 0;
  const int rank = env_rank();
  for (size_t i = 0; i < args.size(); ++i) {
    const bool more = i + 1 < args.size();
    if (args[i] == "--steps" && more)
      steps = std::stoi(args[++i]);
    else if (args[i] == "--fault" && more)
      g_faults.push_back(parse_fault(args[++i], rank));
    else if (args[i] == "--checkpoint-dir" && more)
      checkpoint_dir = args[++i];
    else if (args[i] == "--checkpoint-every" && more)
      checkpoint_every = std::stoi(args[++i]);
    else if (args[i] == "--progress" && more)
      progress_file = args[++i];
    else if (args[i] == "--print-weights")
      print_weights = true;
    else if (args[i] == "--pid-dir" && more)
      pid_dir = args[++i];
    else if (args[i] == "--slow" && more) {
      const std::string v = args[++i];
      slow_rank = std::stoi(v.substr(0, v.find(':')));
      slow_ms = std::stoi(v.substr(v.find(':') + 1));
    } else if (args[i] == "--grandchild")
      grandchild = true;
    else if (args[i] == "--on-term-save" && more) {
      const std::string v = args[++i];
      save_file = v.substr(0, v.find(','));
      save_seconds = std::atof(v.substr(v.find(',') + 1).c_str());
    } else {
      std::cerr << "fault_rank: unknown argument '" << args[i] << "'\n";
      return 2;
    }
  }
  g_pid_dir = pid_dir;
  if (!pid_dir.empty()) std::ofstream(pid_dir + "/rank-" + std::to_string(rank) + ".pid") << getpid() << "\n";
  if (grandchild) start_grandchild(pid_dir, rank);
  if (!save_file.empty()) signal(SIGTERM, [](int) { g_term = true; });
  std::atexit([] {
    int code = 0;
    strike("exit", -1, &code);
  });
  int code = -1;
  try {
    strike("init", -1, &code);
    if (code >= 0) return code;
    nano::World world = nano::init();
    torch::manual_seed(1);
    auto net = std::make_shared<Net>();
    nano::DistributedDataParallel ddp(net, world.comm);
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
    std::unique_ptr<nano::Checkpointer> ckpt;
    int first = 0;
    if (!checkpoint_dir.empty()) {
      nano::CheckpointOptions co;
      co.every_steps = checkpoint_every;
      ckpt = std::make_unique<nano::Checkpointer>(checkpoint_dir, world.comm, co);
      ckpt->track("model", *net).track("optimizer", opt);
      if (auto resumed = ckpt->restore()) {
        first = static_cast<int>(*resumed);
        std::cout << "fault_rank: rank " << rank << " resumed at step " << first << std::endl;
      }
    }
    for (int step = first; step < steps; ++step) {
      auto x = torch::randn({16, 128});
      auto loss = net->forward(x).pow(2).mean();
      strike("step", step, &code);
      if (code >= 0) return code;
      if (rank == slow_rank) std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms));
      opt.zero_grad();
      loss.backward();
      opt.step();
      if (ckpt) ckpt->step();
      if (!progress_file.empty() && rank == 0)
        std::ofstream(progress_file) << step + 1 << " " << restart_count() << "\n";
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      // The ranks agree on stopping (a SIGTERM may reach them a step apart), as real programs do.
      auto stop = torch::full({1}, g_term ? 1.0f : 0.0f);
      if (!save_file.empty()) world.comm->all_reduce(stop);
      if (stop.item<float>() > 0) {
        std::this_thread::sleep_for(std::chrono::duration<double>(save_seconds));
        std::ofstream(save_file + "." + std::to_string(rank)) << "step " << step << "\n";
        std::cout << "fault_rank: rank " << rank << " saved at step " << step << std::endl;
        return 0;
      }
    }
    strike("teardown", -1, &code);
    if (code >= 0) return code;
    std::cout << "fault_rank: rank " << rank << " done (" << world.comm->name() << ")" << std::endl;
    if (print_weights && rank == 0) {
      char hex[32];
      snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(weights_hash(*net)));
      std::cout << "weights " << hex << std::endl;
    }
  } catch (const std::exception& e) {
    std::cerr << "fault_rank: rank " << rank << ": " << e.what() << std::endl;
    return 1;
  }
  return 0;
}
