// nano::Checkpointer in one process (a world of one): round trips, what restore() refuses and
// skips, and that a writer killed at any moment never leaves a checkpoint that loads wrongly.
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/Parallel.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>

#include <nano/auto_lr.h>
#include <nano/checkpoint.h>
#include <nano/communicator.h>
#include <nano/error.h>
#include "runtime/folder_claim/folder_claim.h"
#include "tests/common/error_of.h"
#include "tests/common/stderr_capture.h"

#include <doctest/doctest.h>

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/nano_checkpoint_test_XXXXXX";
  return mkdtemp(tmpl);
}

std::shared_ptr<nano::Communicator> self() { return std::make_shared<nano::SelfCommunicator>(); }

using nano::test::error_of;

// A small training state that changes every step.
struct State {
  torch::nn::Linear model{torch::nn::LinearOptions(8, 4)};
  torch::optim::Adam opt{model->parameters(), torch::optim::AdamOptions(0.01)};
  torch::Tensor extra = torch::zeros({3});
  void train_step() {
    auto loss = model->forward(torch::randn({5, 8})).pow(2).mean();
    opt.zero_grad();
    loss.backward();
    opt.step();
    extra += 1;
  }
};

void track(nano::Checkpointer& c, State& s) {
  c.track("model", *s.model).track("optimizer", s.opt).track("extra", s.extra);
}

// In a forked child of this (multi-threaded) test process: intra-op work on one thread. The
// parent's OpenMP pool does not exist in the child, and libgomp waits for it forever on the
// next parallel region (a copy of a 4 MB tensor is one).
void single_threaded_child() { at::set_num_threads(1); }

// waitpid with a bound: a child still running after `seconds` is SIGKILLed and reported, so a
// regression fails instead of hanging the suite. Returns the status.
int wait_bounded(pid_t pid, int seconds) {
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL_CHECK("child " << pid << " still ran after " << seconds << " s");
      return status;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return status;
}

// An optimizer's state of parameter `p`: libtorch 1.13 keys it by the printed TensorImpl
// address, 2.x by the address itself.
template <class Map>
torch::optim::OptimizerParamState& state_of(Map& state, const at::Tensor& p) {
  if constexpr (std::is_same_v<typename Map::key_type, std::string>) {
    std::ostringstream key;
    key << p.unsafeGetTensorImpl();
    return *state.at(key.str());
  } else {
    return *state.at(p.unsafeGetTensorImpl());
  }
}

}  // namespace

TEST_CASE("checkpoint: a resumed run continues exactly where the saved one was") {
  const std::string dir = temp_dir();
  torch::manual_seed(3);
  State a;
  nano::CheckpointOptions every3;
  every3.every_steps = 3;
  {
    nano::Checkpointer ca(dir, self(), every3);
    track(ca, a);
    CHECK_FALSE(ca.restore());  // fresh start
    for (int i = 0; i < 7; ++i) {
      a.train_step();
      // A schedule moves the rate; libtorch's own optimizer load would not bring it back.
      a.opt.param_groups()[0].options().set_lr(0.01 / (i + 2));
      CHECK(ca.step() == ((i + 1) % 3 == 0));
    }
  }  // its last write is on disk
  // Steps 3 and 6 were saved; a fresh process resumes from 6 and then matches a step by step.
  torch::manual_seed(99);  // a different start: everything must come from the checkpoint
  State b;
  nano::Checkpointer cb(dir, self(), every3);
  track(cb, b);
  REQUIRE(cb.restore() == 6);
  CHECK(cb.steps() == 6);
  CHECK(b.opt.param_groups()[0].options().get_lr() == 0.01 / 7);
  a.opt.param_groups()[0].options().set_lr(0.01 / 7);  // as at step 6, for the step below
  b.train_step();                                      // step 7, with the generator state of step 6 restored
  CHECK(torch::equal(a.model->weight, b.model->weight));
  CHECK(torch::equal(a.extra, b.extra));
  CHECK(a.extra[0].item<float>() == 7);
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint: the state is copied at save(); training that goes on during the write does not change it") {
  const std::string dir = temp_dir();
  State s;
  s.train_step();
  torch::Tensor live = torch::zeros({4});
  std::string expected_weights, expected_moment;
  {
    nano::Checkpointer c(dir, self());
    track(c, s);
    // An object whose save() writes a live tensor: serialised at save() (a snapshot).
    c.track(
        "opaque", [&live](torch::serialize::OutputArchive& a) { a.write("t", live); },
        [&live](torch::serialize::InputArchive& a) { a.read("t", live); });
    live.fill_(7);
    c.save();
    const auto before = s.model->weight.clone();
    const auto moment =
        static_cast<torch::optim::AdamParamState&>(state_of(s.opt.state(), s.model->weight)).exp_avg().clone();
    // In place, as an optimizer step does, while the writer may still be serialising.
    for (int i = 0; i < 3; ++i) s.train_step();
    {
      torch::NoGradGuard no_grad;
      s.model->weight.add_(100);
      live.fill_(-1);
    }
    CHECK(!torch::equal(before, s.model->weight));
    expected_weights = std::to_string(before.sum().item<double>());
    expected_moment = std::to_string(moment.sum().item<double>());
  }
  State fresh;
  torch::Tensor back = torch::zeros({4});
  nano::Checkpointer r(dir, self());
  track(r, fresh);
  r.track(
      "opaque", [&back](torch::serialize::OutputArchive& a) { a.write("t", back); },
      [&back](torch::serialize::InputArchive& a) { a.read("t", back); });
  REQUIRE(r.restore().value_or(-1) == 0);
  CHECK(std::to_string(fresh.model->weight.sum().item<double>()) == expected_weights);
  CHECK(std::to_string(static_cast<torch::optim::AdamParamState&>(state_of(fresh.opt.state(), fresh.model->weight))
                           .exp_avg()
                           .sum()
                           .item<double>()) == expected_moment);
  CHECK(back.eq(7).all().item<bool>());
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint: the newest K are kept; truncated and damaged ones are skipped with one line") {
  const std::string dir = temp_dir();
  State s;
  nano::CheckpointOptions opts;
  opts.every_steps = 1;
  opts.keep = 2;
  {
    nano::Checkpointer c(dir, self(), opts);
    track(c, s);
    for (int i = 0; i < 4; ++i) {
      s.train_step();
      c.step();
    }
  }
  std::ifstream three(dir + "/" + nano::checkpoint_file_name(3)), four(dir + "/" + nano::checkpoint_file_name(4));
  CHECK(three.good());
  CHECK(four.good());
  CHECK_FALSE(std::ifstream(dir + "/" + nano::checkpoint_file_name(2)).good());
  const std::string newest = dir + "/" + nano::checkpoint_file_name(4);
  // A flipped byte in the payload (before its one chunk's tag, the last 16 bytes): the seal over
  // the header and tags holds, so rank 0 chooses it; the chunk is found as it is loaded, and the
  // one before it is loaded instead.
  {
    std::fstream f(newest, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    char ch = 0;
    f.get(ch);
    f.seekp(-100, std::ios::end);
    f.put(static_cast<char>(ch ^ 0x5a));
  }
  CHECK(nano::verify_checkpoint(newest) == "chunk 1 of 1 does not verify (damaged or forged)");
  State r;
  nano::Checkpointer c(dir, self(), opts);
  track(c, r);
  std::optional<int64_t> restored;
  const std::string said = nano::test::stderr_of([&] { restored = c.restore(); });
  CHECK(restored == 3);
  CHECK(said.find(nano::checkpoint_file_name(4) + " (chunk 1 of 1 does not verify (damaged or forged))") !=
        std::string::npos);
  // Truncated.
  const std::string older = dir + "/" + nano::checkpoint_file_name(3);
  CHECK(truncate(older.c_str(), 400) == 0);
  CHECK(nano::verify_checkpoint(older).rfind("truncated: ", 0) == 0);
  State none;
  nano::Checkpointer c2(dir, self(), opts);
  track(c2, none);
  CHECK_FALSE(c2.restore());
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint: damaged files at higher steps are named, left alone, and never prune a good checkpoint") {
  for (int keep : {1, 2}) {
    CAPTURE(keep);
    const std::string dir = temp_dir();
    const std::string garbage = dir + "/" + nano::checkpoint_file_name(90000);
    const std::string cut = dir + "/" + nano::checkpoint_file_name(90001);
    std::ofstream(garbage) << std::string(3000, 'x');
    std::ofstream(cut) << "nano-checkpoint 2\nstep 90001\nworld";  // a header cut short
    State s;
    nano::CheckpointOptions opts;
    opts.every_steps = 1;
    opts.keep = keep;
    {
      nano::Checkpointer c(dir, self(), opts);
      track(c, s);
      const std::string said = nano::test::stderr_of([&] { CHECK_FALSE(c.restore()); });
      CHECK(said == "nano: 2 entries of checkpoint folder " + dir +
                        " never loaded, counted as kept or deleted: ckpt-000000090001.nano (not a nano checkpoint), "
                        "ckpt-000000090000.nano (not a nano checkpoint)\nnano: no usable checkpoint in " +
                        dir + " (2 not whole or not ours, skipped): training starts from step 0\n");
      for (int i = 0; i < 5; ++i) {
        s.train_step();
        c.step();
      }
    }
    // The newest `keep` of this run stay, and the damaged ones as they were.
    for (int step = 1; step <= 5; ++step)
      CHECK(std::ifstream(dir + "/" + nano::checkpoint_file_name(step)).good() == (step > 5 - keep));
    CHECK(nano::verify_checkpoint(dir + "/" + nano::checkpoint_file_name(5)) == "");
    CHECK(std::ifstream(garbage).good());
    CHECK(std::ifstream(cut).good());
    // A restart resumes from this run's newest.
    State r;
    nano::Checkpointer again(dir, self(), opts);
    track(again, r);
    std::optional<int64_t> step;
    nano::test::stderr_of([&] { step = again.restore(); });
    CHECK(step == 5);
    CHECK(r.extra.eq(5).all().item<bool>());
    std::system(("rm -rf " + dir).c_str());
  }
}

TEST_CASE("checkpoint: a job whose folder another job took writes nothing more there and ends naming it") {
  const std::string dir = temp_dir();
  State s;
  nano::CheckpointOptions opts;
  opts.every_steps = 1;
  opts.keep = 1;
  nano::Checkpointer c(dir, self(), opts);
  track(c, s);
  s.train_step();
  CHECK(c.step());
  c.wait();
  // Another job takes the folder over (a higher generation of the claim).
  const nano::FolderOwner other{"job-b", "hostB", "boot-b/1", 4242, 77, 1764672000, 0};
  std::ofstream(dir + "/" + nano::owner_file_name(2)) << nano::format_owner(other);
  const std::string lost = "nano: this job lost checkpoint folder " + dir +
                           " to job job-b (host hostB, pid 4242, since 2025-12-02 10:40:00 UTC): it stops writing "
                           "there (two jobs must not share a checkpoint folder)";
  s.train_step();
  c.step();  // its write finds the claim gone: nothing written, nothing pruned
  CHECK(error_of([&] { c.wait(); }) == lost);
  CHECK(error_of([&] { c.step(); }) == lost);
  CHECK(std::ifstream(dir + "/" + nano::checkpoint_file_name(1)).good());
  CHECK_FALSE(std::ifstream(dir + "/" + nano::checkpoint_file_name(2)).good());
  unlink((dir + "/" + nano::owner_file_name(2)).c_str());
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint: another model is refused with its first mismatch, and nothing is changed") {
  const std::string dir = temp_dir();
  {
    State s;
    nano::Checkpointer c(dir, self());
    track(c, s);
    s.train_step();
    c.save();
  }
  torch::nn::Linear other(torch::nn::LinearOptions(8, 5));  // 5 outputs instead of 4
  torch::optim::Adam opt(other->parameters(), torch::optim::AdamOptions(0.01));
  const auto before = other->weight.clone();
  nano::Checkpointer c(dir, self());
  c.track("model", *other).track("optimizer", opt);
  const std::string e = error_of([&] { c.restore(); });
  CHECK(e.find("does not fit what is tracked: parameter weight is [4, 8] Float there and [5, 8] Float here") !=
        std::string::npos);
  CHECK(torch::equal(before, other->weight));
  nano::Checkpointer named(dir, self());
  State s2;
  named.track("net", *s2.model);
  CHECK(error_of([&] { named.restore(); }).find("it has no 'net'") != std::string::npos);
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint: a label of another value is refused before anything changes; a missing one counts as given") {
  const std::string dir = temp_dir();
  torch::nn::Linear net(torch::nn::LinearOptions(3, 2));
  {
    nano::Checkpointer c(dir, self());
    c.track_label("precision", "64", "32").track("model", *net);
    c.save();
  }
  torch::nn::Linear fresh(torch::nn::LinearOptions(3, 2));
  const auto before = fresh->weight.clone();
  nano::Checkpointer other(dir, self());
  other.track_label("precision", "32", "32").track("model", *fresh);
  CHECK(error_of([&] { other.restore(); })
            .find("does not fit what is tracked: it was written with precision \"64\", and this run has precision "
                  "\"32\" (resume with the same precision, or use another folder)") != std::string::npos);
  CHECK(torch::equal(before, fresh->weight));
  nano::Checkpointer same(dir, self());
  same.track_label("precision", "64", "32").track("model", *fresh);
  CHECK(same.restore().value_or(-1) == 0);
  CHECK(torch::equal(net->weight, fresh->weight));
  // A checkpoint written without the label (before it was tracked) is taken as `missing`.
  std::system(("rm -rf " + dir + "/*").c_str());
  {
    nano::Checkpointer c(dir, self());
    c.track("model", *net);
    c.save();
  }
  nano::Checkpointer old_as_32(dir, self());
  old_as_32.track_label("precision", "32", "32").track("model", *fresh);
  CHECK(old_as_32.restore().value_or(-1) == 0);
  nano::Checkpointer old_as_bf16(dir, self());
  old_as_bf16.track_label("precision", "bf16", "32").track("model", *fresh);
  CHECK(error_of([&] { old_as_bf16.restore(); }).find("written with precision \"32\"") != std::string::npos);
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint: bad folders and options are one-line usage errors") {
  CHECK(error_of([] {
          nano::Checkpointer c("/proc/nano-no", self());
        }).rfind("nano: cannot create checkpoint folder /proc/nano-no", 0) == 0);
  const std::string dir = temp_dir();
  std::ofstream(dir + "/file") << "x";
  CHECK(error_of([&] { nano::Checkpointer c(dir + "/file", self()); }) ==
        "nano: checkpoint folder " + dir + "/file is not a folder");
  nano::CheckpointOptions bad;
  bad.keep = 0;
  CHECK(error_of([&] { nano::Checkpointer c(dir, self(), bad); }) == "nano: checkpoint_keep must be at least 1, got 0");
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint: a writer SIGKILLed at random moments never leaves a checkpoint that loads wrongly") {
  const std::string dir = temp_dir();
  std::mt19937 random(7);
  for (int trial = 0; trial < 12; ++trial) {
    pid_t pid = fork();
    if (pid == 0) {
      single_threaded_child();
      // Saves a 4 MB model over and over.
      torch::nn::Linear big(torch::nn::LinearOptions(1024, 1024));
      nano::Checkpointer c(dir, self());
      c.track("model", *big);
      for (int i = 0;; ++i) {
        {
          torch::NoGradGuard g;
          big->weight.fill_(static_cast<float>(i));
        }
        c.step();
        c.save();
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50 + random() % 400));
    kill(pid, SIGKILL);
    wait_bounded(pid, 30);
    // Whatever is there: the newest that verifies loads, and holds one consistent step.
    torch::nn::Linear big(torch::nn::LinearOptions(1024, 1024));
    nano::Checkpointer c(dir, self());
    c.track("model", *big);
    if (auto step = c.restore()) {
      CHECK(big->weight.min().item<float>() == big->weight.max().item<float>());
      CHECK(big->weight[0][0].item<float>() == static_cast<float>(*step - 1));
    }
  }
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint: a full disk keeps the previous checkpoint and says so in one line") {
  // A 1 MiB tmpfs in a private mount namespace of a child process (root only).
  if (geteuid() != 0) {
    MESSAGE("skipped: needs root for a private mount namespace");
    return;
  }
  const std::string dir = temp_dir();
  pid_t pid = fork();
  if (pid == 0) {
    // Mounts made private first, so the tmpfs cannot show in the parent's namespace. In a
    // chroot whose root is not a mount point (the Debian 13 leg) that is impossible: skip.
    single_threaded_child();
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) _exit(77);
    if (mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=1m,mode=0700") != 0) _exit(3);
    torch::nn::Linear small(torch::nn::LinearOptions(64, 64));  // ~17 KB
    nano::Checkpointer c(dir, self());
    c.track("model", *small);
    c.step();
    c.save();
    {
      torch::nn::Linear big(torch::nn::LinearOptions(1024, 1024));  // 4 MB: does not fit
      nano::Checkpointer c2(dir, self());
      c2.track("model", *small).track("big", *big);
      c2.step();
      c2.step();
      c2.save();
    }  // waits for the writer, which reports the full disk in one line
    // The first checkpoint is intact and loads; the failed write left no file behind.
    torch::nn::Linear again(torch::nn::LinearOptions(64, 64));
    nano::Checkpointer c3(dir, self());
    c3.track("model", *again);
    auto step = c3.restore();
    const bool no_temporaries = std::system(("ls -A " + dir + " | grep -q tmp").c_str()) != 0;
    _exit(step == 1 && torch::equal(again->weight, small->weight) && no_temporaries ? 0 : 4);
  }
  const int status = wait_bounded(pid, 120);
  CHECK(WIFEXITED(status));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
    MESSAGE("skipped: no private mount namespace here (a chroot whose root is not a mount point)");
  } else {
    CHECK(WEXITSTATUS(status) == 0);
  }
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("checkpoint: an SGD snapshot and an optimizer of another kind both restore as they were at save()") {
  const std::string dir = temp_dir();
  torch::manual_seed(5);
  torch::nn::Linear net(torch::nn::LinearOptions(6, 3));
  torch::optim::SGD sgd(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  // A subclass: not one of libtorch's own types, so serialised at save() instead of staged.
  struct MySgd : torch::optim::SGD {
    using torch::optim::SGD::SGD;
  };
  MySgd mine(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.5));
  const auto train = [&] {
    for (auto* o : std::initializer_list<torch::optim::Optimizer*>{&sgd, &mine}) {
      o->zero_grad();
      net->forward(torch::randn({4, 6})).pow(2).sum().backward();
      o->step();
    }
  };
  const auto momentum = [](torch::optim::Optimizer& o, const at::Tensor& p) {
    return static_cast<torch::optim::SGDParamState&>(state_of(o.state(), p)).momentum_buffer().clone();
  };
  train();
  at::Tensor saved_sgd, saved_mine;
  {
    nano::Checkpointer c(dir, self());
    c.track("sgd", sgd).track("mine", mine);
    c.save();
    saved_sgd = momentum(sgd, net->weight);
    saved_mine = momentum(mine, net->weight);
    train();  // while the writer may still be at work
  }
  CHECK_FALSE(torch::equal(saved_sgd, momentum(sgd, net->weight)));
  torch::optim::SGD sgd2(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  MySgd mine2(net->parameters(), torch::optim::SGDOptions(0.05).momentum(0.5));
  nano::Checkpointer r(dir, self());
  r.track("sgd", sgd2).track("mine", mine2);
  REQUIRE(r.restore().value_or(-1) == 0);
  CHECK(torch::equal(momentum(sgd2, net->weight), saved_sgd));
  CHECK(torch::equal(momentum(mine2, net->weight), saved_mine));
  std::system(("rm -rf " + dir).c_str());
}
