// The rank program of the runtime's process-level tests: `rank_worker SCENARIO [ARGS]`.
// Each rank checks its own results against closed forms or a local single-process reference,
// prints "OK <scenario> rank R of N (<backend>)" and exits 0, or prints "FAIL ..." and exits 1.
// nano::Error escaping init (e.g. the rendezvous timeout) is printed to stderr, exit 3.
// Here: the training scenarios (DDP, sharding, auto_lr, balancing) and the runner; the
// communicator's own scenarios are in rank_worker_collectives.cc.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nano/error.h>
#include <nano/nano.h>
#include "tests/runtime/rank_worker.h"

namespace {

using nano::test::check;
using nano::test::failures;
using nano::test::scenario_collectives;
using nano::test::scenario_mismatch;
using nano::test::scenario_peer_exits;
using nano::test::str;
using nano::test::tag;

// The scenario running now (with its bucket cap, "grads:256"): printed lines carry it, so the
// lines of a list of scenarios run in one world stay apart.
std::string current;

// --- models --------------------------------------------------------------------------------
struct NetImpl : torch::nn::Module {
  NetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(6, 16));
    fc2 = register_module("fc2", torch::nn::Linear(16, 8));
    fc3 = register_module("fc3", torch::nn::Linear(8, 3));
    extra = register_module("extra", torch::nn::Linear(16, 3));
    unused = register_parameter("unused", torch::randn({4}));
    bn = register_module("bn", torch::nn::BatchNorm1d(16));
  }
  // use_extra: the branch only some ranks take (unused-parameter test).
  torch::Tensor forward(torch::Tensor x, bool use_extra = false) {
    auto h = torch::relu(fc1(x));
    auto y = fc3(torch::relu(fc2(h)));
    if (use_extra) y = y + extra(h);
    return y;
  }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr}, extra{nullptr};
  torch::nn::BatchNorm1d bn{nullptr};
  torch::Tensor unused;
};
TORCH_MODULE(Net);

torch::Tensor flat_params(torch::nn::Module& m) {
  std::vector<torch::Tensor> all;
  for (auto& p : m.parameters()) all.push_back(p.detach().reshape(-1).to(torch::kDouble));
  for (auto& b : m.buffers()) all.push_back(b.detach().reshape(-1).to(torch::kDouble));
  return torch::cat(all);
}

void copy_params(torch::nn::Module& from, torch::nn::Module& to) {
  torch::NoGradGuard no_grad;
  auto a = from.parameters(), b = to.parameters();
  for (size_t i = 0; i < a.size(); ++i) b[i].copy_(a[i]);
}

// Deterministic data of the whole world: rank r's batch is rows [r*B, (r+1)*B).
std::pair<torch::Tensor, torch::Tensor> world_batch(int n, int per_rank, int iteration) {
  auto gen = torch::make_generator<at::CPUGeneratorImpl>(1000 + iteration);
  auto x = torch::randn({n * per_rank, 6}, gen);
  auto y = torch::randn({n * per_rank, 3}, gen);
  return {x, y};
}

// "grads:256": the scenario and its bucket cap (DDP's default without one).
std::pair<std::string, size_t> scenario_and_cap(const std::string& item) {
  const auto colon = item.find(':');
  if (colon == std::string::npos) return {item, 25u * 1024 * 1024};
  return {item.substr(0, colon), std::stoul(item.substr(colon + 1))};
}

// --- broadcast: differently seeded replicas become identical -------------------------------
void scenario_broadcast(nano::World& w, size_t cap) {
  torch::manual_seed(17 + w.rank());
  Net net;
  {
    torch::NoGradGuard g;
    net->bn->running_mean.fill_(w.rank() + 3);
  }
  auto before = flat_params(*net);
  nano::DDP<Net> ddp(net, w.comm, {cap});
  auto after = flat_params(*net);
  auto reference = after.clone();
  w.comm->broadcast(reference, 0);
  check(torch::equal(after, reference), "replica differs from rank 0 after DDP construction");
  if (w.rank() == 0) check(torch::equal(before, after), "rank 0's parameters changed");
  if (w.rank() != 0) check(!torch::equal(before, after), "seeds did not differ (test is vacuous)");
  // Buffers drift (each rank's own batch statistics); forward() brings rank 0's back.
  {
    torch::NoGradGuard g;
    net->bn->running_var.fill_(w.rank() + 7);
  }
  ddp.forward(torch::ones({2, 6}));
  check(net->bn->running_var.eq(7).all().item<bool>(), "buffer not synced from rank 0 before forward");
}

// --- gradient averaging: closed form through the multi-bucket path -------------------------
void scenario_rank_grads(nano::World& w, size_t cap) {
  torch::manual_seed(1);
  Net net;
  nano::DistributedDataParallel ddp(net, w.comm, {cap});
  const size_t buckets = ddp.bucket_layout().size();
  std::cout << current << ": buckets " << buckets << std::endl;
  const int n = w.size();
  for (int it = 0; it < 2; ++it) {
    net->zero_grad();
    auto loss = torch::zeros({}, torch::kFloat);
    for (auto& p : net->parameters()) loss = loss + p.sum() * float(w.rank() + it);
    loss.backward();
    // sum over ranks of (r + it) / n
    const double expect = (n * (n - 1) / 2.0 + n * it) / n;
    for (auto& p : net->parameters()) {
      check(p.grad().defined() && p.grad().eq(float(expect)).all().item<bool>(),
            "averaged grad != " + str(expect) + " at iteration " + std::to_string(it));
    }
  }
}

// --- N-rank DDP gradients == single-process gradients of the concatenated batch -------------
void scenario_grads(nano::World& w, size_t cap) {
  const int n = w.size(), r = w.rank(), per = 4;
  torch::manual_seed(123);
  Net reference;
  torch::manual_seed(r == 0 ? 123 : 500 + r);
  Net net;
  nano::DistributedDataParallel ddp(net, w.comm, {cap});
  // Gradients alias DDP's buckets after a step: every way of clearing them must keep working.
  torch::optim::SGD clearer(net->parameters(), torch::optim::SGDOptions(0.0));
  for (int it = 0; it < 4; ++it) {
    auto [x, y] = world_batch(n, per, it);
    if (it == 1)
      net->zero_grad(/*set_to_none=*/true);
    else if (it == 2)
      clearer.zero_grad();  // Optimizer::zero_grad detaches in place
    else
      net->zero_grad();
    reference->zero_grad();
    torch::mse_loss(net->forward(x.narrow(0, r * per, per)), y.narrow(0, r * per, per)).backward();
    torch::mse_loss(reference->forward(x), y).backward();
    auto a = net->parameters(), b = reference->parameters();
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!b[i].grad().defined()) continue;  // "extra", "unused": none in the reference
      worst = std::max(worst, (a[i].grad() - b[i].grad()).abs().max().item<double>());
    }
    check(worst <= 1e-6, "iteration " + std::to_string(it) + ": max |grad - reference| = " + str(worst));
    // Step both identically so the next iteration starts from new weights.
    torch::NoGradGuard g;
    for (size_t i = 0; i < a.size(); ++i) {
      if (b[i].grad().defined()) {
        a[i].sub_(0.1 * b[i].grad());
        b[i].sub_(0.1 * b[i].grad());
      }
    }
  }
  // no_sync: two local micro-batches accumulate, the third backward averages the sum.
  net->zero_grad();
  reference->zero_grad();
  for (int micro = 0; micro < 3; ++micro) {
    auto [x, y] = world_batch(n, per, 10 + micro);
    auto local = torch::mse_loss(net->forward(x.narrow(0, r * per, per)), y.narrow(0, r * per, per));
    if (micro < 2) {
      auto guard = ddp.no_sync();
      local.backward();
    } else {
      local.backward();
    }
    torch::mse_loss(reference->forward(x), y).backward();
  }
  auto a = net->parameters(), b = reference->parameters();
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (b[i].grad().defined()) worst = std::max(worst, (a[i].grad() - b[i].grad()).abs().max().item<double>());
  }
  check(worst <= 1e-6, "no_sync accumulation: max |grad - reference| = " + str(worst));
}

// --- bf16 gradient exchange: within bfloat16's rounding of the float exchange ----------------
// Two replicas of one model, the same data: one all-reduces float32, one bfloat16. A wide
// layer (64 KB of gradients: the shared-memory path where a host has it) and a small one.
void scenario_bf16_grads(nano::World& w) {
  const int n = w.size(), r = w.rank();
  auto make = [] {
    torch::manual_seed(7);
    return torch::nn::Sequential(torch::nn::Linear(64, 256), torch::nn::Tanh(), torch::nn::Linear(256, 3));
  };
  auto plain = make();
  auto narrow = make();
  nano::DistributedDataParallel float_ddp(plain.ptr(), w.comm);
  nano::DdpOptions bf16_options;
  bf16_options.bf16_gradient_exchange = true;
  nano::DistributedDataParallel bf16_ddp(narrow.ptr(), w.comm, bf16_options);
  for (int it = 0; it < 3; ++it) {
    torch::manual_seed(1000 * it + r);  // each rank its own batch
    const auto x = torch::randn({8, 64}), y = torch::randn({8, 3});
    plain->zero_grad();
    narrow->zero_grad();
    torch::mse_loss(plain->forward(x), y).backward();
    torch::mse_loss(narrow->forward(x), y).backward();
    auto solo = make();  // no DDP: this rank's own gradients
    torch::mse_loss(solo->forward(x), y).backward();
    auto pa = plain->parameters(), pb = narrow->parameters(), ps = solo->parameters();
    for (size_t i = 0; i < pa.size(); ++i) {
      const auto averaged = pa[i].grad(), through_bf16 = pb[i].grad();
      check(through_bf16.scalar_type() == torch::kFloat, "the gradient is no longer float32");
      // The result came through bfloat16: every value is one.
      check(torch::equal(through_bf16.to(torch::kBFloat16).to(torch::kFloat), through_bf16),
            "parameter " + std::to_string(i) + ": values that bfloat16 cannot hold, so no bfloat16 exchange");
      // Each rank's part is rounded to bfloat16 (2^-9 relative), and the float sum once more:
      // |error| <= 2^-9 (sum_r |g_r| + |sum_r g_r|) / n per value; checked with twice that.
      torch::Tensor magnitude = ps[i].grad().abs().contiguous();
      w.comm->all_reduce(magnitude, nano::ReduceOp::kSum);
      const auto bound = std::ldexp(1.0, -8) * (magnitude / n + averaged.abs()) + 1e-7;
      const double excess = ((through_bf16 - averaged).abs() - bound).max().item<double>();
      check(excess <= 0, "iteration " + std::to_string(it) + " parameter " + std::to_string(i) +
                             ": |bf16 - float32 exchange| exceeds bfloat16's rounding by " + str(excess));
      check(!torch::equal(through_bf16, averaged), "bfloat16 and float32 exchanges equal exactly");
    }
  }
}

// --- unused parameters: some ranks skip a branch, one parameter is never used ---------------
void scenario_unused(nano::World& w, size_t cap) {
  const int n = w.size(), r = w.rank(), per = 3;
  torch::manual_seed(7);
  Net net, reference;
  copy_params(*net, *reference);
  nano::DistributedDataParallel ddp(net, w.comm, {cap});
  for (int it = 0; it < 3; ++it) {
    auto [x, y] = world_batch(n, per, 20 + it);
    // Rank q takes the extra branch when (q + it) is odd: the set of users changes per step.
    auto uses_extra = [&](int q) { return (q + it) % 2 == 1; };
    net->zero_grad();
    torch::mse_loss(net->forward(x.narrow(0, r * per, per), uses_extra(r)), y.narrow(0, r * per, per)).backward();
    // Reference: the mean over ranks of each rank's gradient, computed locally.
    reference->zero_grad();
    for (int q = 0; q < n; ++q) {
      auto loss =
          torch::mse_loss(reference->forward(x.narrow(0, q * per, per), uses_extra(q)), y.narrow(0, q * per, per)) /
          double(n);
      loss.backward();
    }
    auto a = net->parameters(), b = reference->parameters();
    double worst = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      auto expect = b[i].grad().defined() ? b[i].grad() : torch::zeros_like(b[i]);
      if (!a[i].grad().defined()) {
        check(false, "a parameter has no gradient after backward");
        continue;
      }
      worst = std::max(worst, (a[i].grad() - expect).abs().max().item<double>());
    }
    check(worst <= 1e-6, "iteration " + std::to_string(it) + ": max |grad - reference| = " + str(worst));
  }
}

// --- the seed's equivalence check ----------------------------------------------------------
void scenario_equivalence(nano::World& w) {
  // Rows (x, target): x = [0, 0, 1, 1], targets 0.
  auto rows = torch::tensor({0.f, 0.f, 0.f, 0.f, 1.f, 0.f, 1.f, 0.f}).reshape({4, 2});
  auto dataset = torch::data::datasets::TensorDataset(rows);
  torch::nn::Linear model(torch::nn::LinearOptions(1, 1).bias(false));
  {
    torch::NoGradGuard g;
    model->weight.fill_(1.0);
  }
  nano::DDP<torch::nn::Linear> ddp(model, w.comm);
  const double lr = w.size() == 1 ? 0.25 : 0.5;
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(lr));
  nano::AutoLr auto_lr(sgd, w.size(), {/*enabled=*/false});
  nano::ShardOptions shard;
  shard.shuffle = w.size() > 1;  // one process: the seed's fixed order
  auto loader =
      nano::make_sharded_loader(dataset.map(torch::data::transforms::Stack<torch::data::TensorExample>()), w, 2, shard);
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (auto& batch : *loader) {
      auto xb = batch.data.narrow(1, 0, 1);
      auto yb = batch.data.narrow(1, 1, 1);
      sgd.zero_grad();
      torch::mse_loss(ddp(xb), yb).backward();
      sgd.step();
      auto_lr.step();
    }
  }
  const double final_w = model->weight.item<double>();
  std::cout << current << ": w " << str(final_w) << std::endl;
  check(final_w == 0.25, "final w = " + str(final_w) + ", expected 0.25 exactly");
}

// --- auto_lr across a real world: the rate at every step equals the closed form -------------
void scenario_auto_lr(nano::World& w) {
  auto p = torch::zeros({3}, torch::requires_grad());
  torch::optim::SGD sgd({p}, torch::optim::SGDOptions(0.1));
  nano::AutoLrOptions o;
  o.warmup_steps = 8;
  nano::AutoLr warm(sgd, w.size(), o);
  for (int s = 0; s <= 12; ++s) {
    const double expect = 0.1 * (1.0 + (w.size() - 1) * double(std::min(s, 8)) / 8.0);
    const double got = sgd.param_groups()[0].options().get_lr();
    check(std::abs(got - expect) <= 1e-15, "step " + std::to_string(s) + ": lr " + str(got) + " != " + str(expect));
    p.sum().backward();
    w.comm->all_reduce(p.mutable_grad(), nano::ReduceOp::kAverage);
    sgd.step();
    warm.step();
  }
}

// --- sharding: disjoint shards covering the dataset, reshuffled each epoch ------------------
void scenario_sharding(nano::World& w) {
  const int n = w.size();
  auto dataset = torch::data::datasets::TensorDataset(torch::arange(0, 40 * n, torch::kDouble))
                     .map(torch::data::transforms::Stack<torch::data::TensorExample>());
  auto loader = nano::make_sharded_loader(std::move(dataset), w, 8);
  std::vector<double> first_epoch;
  for (int epoch = 0; epoch < 2; ++epoch) {
    std::vector<double> seen;
    int batches = 0;
    for (auto& batch : *loader) {
      ++batches;
      check(batch.data.size(0) == 8, "per-rank batch size " + std::to_string(batch.data.size(0)));
      for (int64_t i = 0; i < batch.data.size(0); ++i) seen.push_back(batch.data[i].item<double>());
    }
    check(batches == 5, "batches per epoch " + std::to_string(batches));
    // Every index once across ranks: gather all of them on rank 0.
    auto all = w.comm->gather(seen);
    if (w.rank() == 0) {
      std::sort(all.begin(), all.end());
      bool cover = all.size() == size_t(40 * n);
      for (size_t i = 0; cover && i < all.size(); ++i) cover = all[i] == double(i);
      check(cover, "shards of epoch " + std::to_string(epoch) + " are not a disjoint cover");
    }
    if (epoch == 0)
      first_epoch = seen;
    else
      check(seen != first_epoch, "epoch 1 has the same order as epoch 0");
  }
}

// --- batch balancing: a slow rank gets fewer samples, gradients stay the global mean --------
void scenario_balance(nano::World& w) {
  const int n = w.size(), r = w.rank();
  const int64_t per = 16, steps = 12, size = per * n * steps;
  // Rows (x, y, index): y = 3x + 1 with a wobble, so the gradient is not trivially zero.
  auto x = torch::linspace(-1, 1, size, torch::kDouble);
  auto rows = torch::stack({x, 3 * x + 1 + 0.1 * torch::sin(7 * x), torch::arange(0, size, torch::kDouble)}, 1)
                  .to(torch::kFloat);
  torch::nn::Linear model(1, 1);
  nano::DistributedDataParallel ddp(model, w.comm);
  nano::BalanceOptions bo;
  bo.interval_steps = 4;
  nano::ShardOptions shard;
  shard.balancer = nano::make_batch_balancer(ddp, per, bo);
  auto loader = nano::make_sharded_loader(
      torch::data::datasets::TensorDataset(rows).map(torch::data::transforms::Stack<torch::data::TensorExample>()), w,
      per, shard);
  // Extra work per sample: the last rank 20x the others' (sleeping counts as work: it is not
  // waiting in DDP). Large, so it still dominates when busy cores (ctest -j) stretch everyone's
  // real work. The balancer must move samples away from it.
  const auto per_sample = std::chrono::microseconds(r == n - 1 ? 2000 : 100);
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto seen = torch::zeros({size}, torch::kDouble);  // how often this rank took each row
    int batches = 0;
    for (auto& batch : *loader) {
      ++batches;
      const int64_t b = batch.data.size(0);
      for (int64_t i = 0; i < b; ++i) seen[batch.data[i][2].item<int64_t>()] += 1;
      std::this_thread::sleep_for(per_sample * b);
      auto xb = batch.data.narrow(1, 0, 1), yb = batch.data.narrow(1, 1, 1);
      model->zero_grad();
      torch::mse_loss(model->forward(xb), yb).backward();
      // The reference: d/dw and d/db of the mean squared error over every rank's rows of this
      // step, from sums all-reduced over the ranks.
      torch::NoGradGuard g;
      auto err = model->forward(xb) - yb;
      auto sums =
          torch::stack({(err * xb).sum(), err.sum(), torch::tensor(double(b), torch::kFloat)}).to(torch::kDouble);
      w.comm->all_reduce(sums, nano::ReduceOp::kSum);
      const double total = sums[2].item<double>();
      const double dw = 2 * sums[0].item<double>() / total, db = 2 * sums[1].item<double>() / total;
      check(std::abs(model->weight.grad().item<double>() - dw) <= 1e-5 &&
                std::abs(model->bias.grad().item<double>() - db) <= 1e-5,
            "epoch " + std::to_string(epoch) + " step " + std::to_string(batches) + ": grad (" +
                str(model->weight.grad().item<double>()) + ", " + str(model->bias.grad().item<double>()) +
                ") != global mean (" + str(dw) + ", " + str(db) + ")");
      check(total == double(per * n), "global batch " + str(total));
      check(std::abs(ddp.gradient_weight() - double(n * b) / total) <= 1e-12,
            "gradient weight " + str(ddp.gradient_weight()) + " for " + std::to_string(b) + " of " + str(total));
      for (auto& p : model->parameters()) p.sub_(0.05 * p.grad());
    }
    check(batches == steps, "batches per epoch " + std::to_string(batches));
    w.comm->all_reduce(seen, nano::ReduceOp::kSum);
    check(seen.eq(1).all().item<bool>(), "epoch " + std::to_string(epoch) + ": rows taken " +
                                             str(seen.min().item<double>()) + ".." + str(seen.max().item<double>()) +
                                             " times, expected once each");
  }
  const auto split = shard.balancer->split();
  std::cout << current << ": split";
  for (auto s : split) std::cout << " " << s;
  std::cout << std::endl;
  // Far slower: a small share would be ideal; any clear move passes.
  check(split[n - 1] < per - 2,
        "the slow rank still takes " + std::to_string(split[n - 1]) + " of " + std::to_string(per));
}

// Runs one scenario of the list; false when it failed (said in a FAIL line).
bool run_scenario(nano::World& world, const std::string& item) {
  const auto [scenario, cap] = scenario_and_cap(item);
  current = item;
  tag = item + " rank " + std::to_string(world.rank());
  const int failed_before = failures;
  try {
    if (scenario == "collectives")
      scenario_collectives(world);
    else if (scenario == "broadcast")
      scenario_broadcast(world, cap);
    else if (scenario == "rank-grads")
      scenario_rank_grads(world, cap);
    else if (scenario == "grads")
      scenario_grads(world, cap);
    else if (scenario == "unused")
      scenario_unused(world, cap);
    else if (scenario == "equivalence")
      scenario_equivalence(world);
    else if (scenario == "auto-lr")
      scenario_auto_lr(world);
    else if (scenario == "sharding")
      scenario_sharding(world);
    else if (scenario == "bf16-grads")
      scenario_bf16_grads(world);
    else if (scenario == "balance")
      scenario_balance(world);
    else if (scenario == "peer-exits")
      scenario_peer_exits(world);
    else if (scenario.rfind("mismatch", 0) == 0)
      scenario_mismatch(world, scenario);
    else {
      std::cout << "FAIL " << tag << ": unknown scenario" << std::endl;
      return false;
    }
  } catch (const std::exception& e) {
    std::cout << "FAIL " << tag << ": exception: " << e.what() << std::endl;
    return false;
  }
  if (failures > failed_before) return false;
  std::cout << "OK " << item << " rank " << world.rank() << " of " << world.size() << " (" << world.comm->name() << ")"
            << std::endl;
  return true;
}

}  // namespace

// rank_worker SCENARIO[:BUCKET_CAP][,SCENARIO...]: the scenarios one after another in one world
// (one process start and one rendezvous for many checks); the first that fails ends the rank.
int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: rank_worker SCENARIO[:BUCKET_CAP_BYTES][,SCENARIO...]\n";
    return 2;
  }
  nano::World world;
  try {
    world = nano::init();
  } catch (const nano::Error& e) {
    std::cerr << e.what() << std::endl;
    return 3;
  }
  std::stringstream list(argv[1]);
  for (std::string item; std::getline(list, item, ',');)
    if (!run_scenario(world, item)) return 1;
  return 0;
}
