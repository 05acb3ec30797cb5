// Batch balancing in one process: the split decisions as tables, the balancer against a
// communicator that plays the other ranks, and balanced samplers side by side.
#include <torch/data/datasets/tensor.h>
#include <torch/data/transforms/stack.h>
#include <torch/nn/modules/linear.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <nano/communicator.h>
#include <nano/ddp.h>
#include <nano/error.h>
#include <nano/load_balance.h>
#include <nano/sharding.h>

// c10's logging defines a fatal CHECK; doctest's must win, so it comes last.
#undef CHECK
#include <doctest/doctest.h>

namespace {

using Split = std::vector<int64_t>;

std::string usage_error(const std::function<void()>& f) {
  try {
    f();
  } catch (const nano::UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

// Rank `rank` of `size` whose all-reduce replaces the table with what "the ranks measured":
// every rank's (seconds, samples) pair from `measured`, its own slot included.
class ScriptedComm : public nano::SelfCommunicator {
 public:
  ScriptedComm(int rank, int size, std::shared_ptr<std::vector<double>> measured)
      : rank_(rank), size_(size), measured_(std::move(measured)) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::unique_ptr<nano::Work> all_reduce_async(at::Tensor& tensor, nano::ReduceOp op) override {
    REQUIRE(tensor.numel() == 2 * size_);
    own = {tensor[2 * rank_].item<double>(), tensor[2 * rank_ + 1].item<double>()};
    ++exchanges;
    for (int i = 0; i < 2 * size_; ++i) tensor[i] = (*measured_)[i];
    return SelfCommunicator::all_reduce_async(tensor, op);
  }
  std::vector<double> own;  // what this rank contributed to the last exchange
  int exchanges = 0;

 private:
  int rank_, size_;
  std::shared_ptr<std::vector<double>> measured_;
};

}  // namespace

TEST_CASE("apportion: proportional shares, at least one each, largest remainders first") {
  struct Row {
    int64_t total;
    std::vector<double> speeds;
    Split expect;
  };
  const std::vector<Row> rows = {
      {128, {1, 1}, {64, 64}},
      {129, {1, 1}, {65, 64}},  // the tie goes to the lower rank
      {128, {3, 1}, {96, 32}},
      {128, {2865, 2318}, {71, 57}},  // the two cores of the development VM
      {10, {1, 1, 1}, {4, 3, 3}},
      {4, {1000, 1, 1, 1}, {1, 1, 1, 1}},  // one sample each comes first
      {8, {1000, 1, 1}, {6, 1, 1}},
      {2, {0.5, 7}, {1, 1}},
      {64, {1}, {64}},
  };
  for (const auto& row : rows) {
    CAPTURE(row.total);
    const Split got = nano::apportion(row.total, row.speeds);
    CHECK(got == row.expect);
    CHECK(std::accumulate(got.begin(), got.end(), int64_t{0}) == row.total);
  }
  CHECK(usage_error([] {
          nano::apportion(1, {1, 1});
        }) == "nano: apportion: bad total 1: fewer samples than the 2 ranks");
  CHECK(usage_error([] {
          nano::apportion(8, {1, 0});
        }) == "nano: apportion: bad speed 0.000000 of rank 1: expected a finite number > 0");
  CHECK(usage_error([] {
          nano::apportion(8, {1, std::numeric_limits<double>::infinity()});
        }) == "nano: apportion: bad speed inf of rank 1: expected a finite number > 0");
  CHECK(usage_error([] { nano::apportion(8, {}); }) == "nano: apportion: no ranks to split 8 samples among");
}

TEST_CASE("rebalanced_split: moves only for a real gain") {
  struct Row {
    Split current;
    std::vector<double> cost;
    double min_gain;
    Split expect;
  };
  const std::vector<Row> rows = {
      {{64, 64}, {1.0, 1.0}, 0.01, {64, 64}},    // equal speeds: stay
      {{64, 64}, {1.0, 1.25}, 0.01, {71, 57}},   // rank 1 20% slower: 80 -> 71.1 predicted
      {{64, 64}, {1.0, 1.005}, 0.01, {64, 64}},  // 0.5% apart: not worth a change
      {{71, 57}, {1.0, 1.0}, 0.01, {64, 64}},    // the cores evened out: back to equal
      {{71, 57}, {1.0, 1.24}, 0.01, {71, 57}},   // already balanced
      {{40, 40, 48}, {2.0, 2.0, 1.0}, 0.0, {32, 32, 64}},
  };
  for (const auto& row : rows) {
    CHECK(nano::rebalanced_split(row.current, row.cost, row.min_gain) == row.expect);
  }
  CHECK(usage_error([] {
          nano::rebalanced_split({1, 1}, {1}, 0.01);
        }) == "nano: rebalanced_split: 2 shares but 1 costs");
  CHECK(usage_error([] {
          nano::rebalanced_split({1, 1}, {1, -2}, 0.01);
        }) == "nano: rebalanced_split: bad cost -2.000000 of rank 1: expected seconds per sample > 0");
}

TEST_CASE("the balancer measures work without waiting, exchanges on schedule, and weights gradients") {
  // Rank 0 of 2; its clock advances 10 ms per step, 4 ms of which it waits in DDP.
  auto measured = std::make_shared<std::vector<double>>(std::vector<double>{0.0, 0.0, 0.0, 0.0});
  auto comm = std::make_shared<ScriptedComm>(0, 2, measured);
  double clock = 0, waited = 0, weight = 0;
  nano::BalanceHooks hooks;
  hooks.clock = [&] { return clock; };
  hooks.sync_wait_seconds = [&] { return waited; };
  hooks.set_gradient_weight = [&](double w) { weight = w; };
  nano::BalanceOptions options;
  options.interval_steps = 8;
  options.smoothing = 1.0;
  nano::BatchBalancer balancer(comm, 128, hooks, options);
  CHECK(balancer.split() == Split{64, 64});
  auto step = [&] {
    auto slice = balancer.next_step(128);
    clock += 0.010;
    waited += 0.004;
    return slice;
  };
  // The other rank reports 1.25x this rank's cost; this rank's real numbers are ignored here.
  *measured = {0.006 * 1, 64, 0.0075, 64};
  auto first = step();
  CHECK(first.begin == 0);
  CHECK(first.length == 64);
  CHECK(weight == doctest::Approx(1.0));
  CHECK(comm->exchanges == 0);
  step();  // call 2: the first exchange (2, 4, 8, then every 8)
  CHECK(comm->exchanges == 1);
  CHECK(comm->own[0] == doctest::Approx(0.006));  // 10 ms elapsed - 4 ms waiting
  CHECK(comm->own[1] == 64);
  CHECK(balancer.split() == Split{71, 57});
  auto third = step();
  CHECK(third.begin == 0);
  CHECK(third.length == 71);
  CHECK(weight == doctest::Approx(2.0 * 71 / 128));
  for (int i = 4; i <= 16; ++i) step();
  CHECK(comm->exchanges == 4);  // after calls 2, 4, 8 and 16
  CHECK(comm->own[1] == 8 * 71);
  // A smaller last batch is split by the same speeds: one each, then 18 as 10 : 8.
  auto last = balancer.next_step(20);
  CHECK(last.length == 11);
  CHECK(weight == doctest::Approx(2.0 * 11 / 20));
  // A new epoch: the gap before its first step (evaluation...) is not measured.
  balancer.epoch_begin();
  clock += 5.0;
  step();
  for (int i = 0; i < 6; ++i) step();
  CHECK(comm->exchanges == 5);
  CHECK(comm->own[0] == doctest::Approx(7 * 0.006));  // the 5 s gap is not in it
  CHECK_THROWS_WITH(balancer.next_step(129), "nano: BatchBalancer: bad global batch of 129 samples: expected 2..128");
  // Once the world's communicator is gone, the next exchange says so instead of using it.
  {
    auto gone = std::make_shared<ScriptedComm>(0, 2, measured);
    nano::BatchBalancer orphan(gone, 16, hooks);
    gone.reset();
    orphan.next_step(16);
    CHECK_THROWS_WITH(orphan.next_step(16),
                      "nano: BatchBalancer: the world's communicator is gone (shut down before the loader)");
  }
  CHECK(usage_error([&] { nano::BatchBalancer(comm, 1, hooks); }) ==
        "nano: apportion: bad total 1: fewer samples than the 2 ranks");
  options.interval_steps = 0;
  CHECK(usage_error([&] { nano::BatchBalancer(comm, 8, hooks, options); }) ==
        "nano: BatchBalancer: bad interval_steps=0: expected >= 1");
}

TEST_CASE("balanced samplers: every rank's slice of the same global batches, a disjoint cover") {
  const int world = 2;
  const int64_t n = 100, batch = 8;  // 50 per rank: 6 full global batches of 16, then 4 samples
  auto measured = std::make_shared<std::vector<double>>(std::vector<double>{1.0, 10, 3.0, 10});  // rank 1: 3x slower
  std::vector<std::vector<std::vector<int64_t>>> batches(world);  // [rank][step] -> indices
  std::vector<std::shared_ptr<ScriptedComm>> comms;               // the balancers hold them weakly
  for (int r = 0; r < world; ++r) {
    comms.push_back(std::make_shared<ScriptedComm>(r, world, measured));
    nano::ShardOptions o;
    nano::BalanceOptions b;
    b.interval_steps = 2;
    b.smoothing = 1.0;
    o.balancer = std::make_shared<nano::BatchBalancer>(comms.back(), batch * world, nano::BalanceHooks{}, b);
    auto loader = nano::make_sharded_loader(torch::data::datasets::TensorDataset(torch::arange(0, n, torch::kLong))
                                                .map(torch::data::transforms::Stack<torch::data::TensorExample>()),
                                            r, world, batch, o);
    for (auto& x : *loader) {
      batches[r].emplace_back();
      for (int64_t i = 0; i < x.data.size(0); ++i) batches[r].back().push_back(x.data[i].item<int64_t>());
    }
  }
  REQUIRE(batches[0].size() == 7);
  REQUIRE(batches[1].size() == 7);
  // Equal at first; the first exchange (at the 2nd batch) makes it 12:4 for the 3x slower rank 1.
  CHECK(batches[0][0].size() == 8);
  CHECK(batches[1][0].size() == 8);
  CHECK(batches[0][1].size() == 12);
  CHECK(batches[0][2].size() == 12);
  CHECK(batches[1][2].size() == 4);
  CHECK(batches[0][6].size() + batches[1][6].size() == 4);  // the last global batch
  std::vector<int64_t> all;
  for (const auto& rank : batches)
    for (const auto& b : rank) all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expect(n);
  std::iota(expect.begin(), expect.end(), 0);
  CHECK(all == expect);

  nano::ShardOptions o;
  o.balancer = std::make_shared<nano::BatchBalancer>(comms[0], 16, nano::BalanceHooks{});
  o.workers = 2;
  auto make = [&](int rank, int world_size, size_t b) {
    nano::make_sharded_loader(torch::data::datasets::TensorDataset(torch::arange(0, 10, torch::kLong)), rank,
                              world_size, b, o);
  };
  CHECK(
      usage_error([&] { make(0, 2, 8); }) ==
      "nano: make_sharded_loader: bad workers=2 with a batch balancer: balancing needs workers=0 (it times each step)");
  o.workers = 0;
  CHECK(usage_error([&] { make(0, 2, 4); }) ==
        "nano: make_sharded_loader: the batch balancer splits 16 samples over 2 ranks, but the loader is rank 0 of 2 "
        "with batch_size 4");
}

TEST_CASE("bad balancing inputs are one-line errors naming the value") {
  torch::nn::Linear model(1, 1);
  nano::DistributedDataParallel ddp(model, std::make_shared<nano::SelfCommunicator>());
  CHECK(ddp.gradient_weight() == 1.0);
  CHECK(ddp.sync_wait_seconds() == 0.0);
  CHECK(usage_error([&] { ddp.set_gradient_weight(0.0); }) ==
        "nano: DistributedDataParallel: bad gradient weight 0.000000: expected a finite number > 0");
  CHECK(usage_error([&] { ddp.set_gradient_weight(std::nan("")); }) ==
        "nano: DistributedDataParallel: bad gradient weight nan: expected a finite number > 0");
  ddp.set_gradient_weight(1.5);
  CHECK(ddp.gradient_weight() == 1.5);
  CHECK(usage_error([&] { nano::make_batch_balancer(ddp, 0); }) ==
        "nano: make_batch_balancer: bad per_rank_batch=0: expected >= 1");
  auto balancer = nano::make_batch_balancer(ddp, 4);
  CHECK(balancer->global_batch() == 4);
  CHECK(balancer->next_step(4).length == 4);
  CHECK(ddp.gradient_weight() == 1.0);  // the balancer set this rank's weight: 1 x 4 / 4

  auto comm = std::make_shared<nano::SelfCommunicator>();
  nano::BalanceOptions o;
  o.smoothing = 0;
  CHECK(usage_error([&] { nano::BatchBalancer(comm, 8, {}, o); }) ==
        "nano: BatchBalancer: bad smoothing=0.000000: expected a weight in (0, 1]");
}

TEST_CASE("a balanced sampler saved mid-epoch resumes with the rest of the epoch, whatever the split") {
  const int world = 2;
  const std::size_t n = 100, batch = 8;
  auto measured = std::make_shared<std::vector<double>>(std::vector<double>{1.0, 10, 3.0, 10});  // rank 1: 3x slower
  std::vector<std::shared_ptr<ScriptedComm>> comms;  // the balancers hold them weakly
  std::vector<int64_t> all;
  auto take = [&](nano::EpochShardSampler& sampler, int batches) {
    int taken = 0;
    for (; taken != batches; ++taken) {
      auto indices = sampler.next(batch);
      if (!indices) break;
      all.insert(all.end(), indices->begin(), indices->end());
    }
    return taken;
  };
  for (int r = 0; r < world; ++r) {
    comms.push_back(std::make_shared<ScriptedComm>(r, world, measured));
    nano::BalanceOptions b;
    b.interval_steps = 2;
    b.smoothing = 1.0;
    auto balancer = [&] {
      return std::make_shared<nano::BatchBalancer>(comms.back(), batch * world, nano::BalanceHooks{}, b);
    };
    nano::EpochShardSampler before(n, r, world, /*shuffle=*/true, true, balancer());
    before.reset();               // epoch 0
    before.reset();               // epoch 1: the one saved
    CHECK(take(before, 3) == 3);  // 8, then 12:4 after the first exchange
    std::stringstream saved;
    torch::serialize::OutputArchive out;
    before.save(out);
    out.save_to(saved);

    // A new process: a fresh balancer (equal split again), the position from the archive.
    nano::EpochShardSampler after(n, r, world, true, true, balancer());
    torch::serialize::InputArchive in;
    in.load_from(saved);
    after.load(in);
    CHECK(after.epoch() == 2);
    CHECK(take(after, -1) == 4);  // 3 + 4 = the 7 steps of the epoch
    CHECK(after.next(batch) == torch::nullopt);
  }
  // Both ranks together: epoch 1's order, each sample once.
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expect(n);
  std::iota(expect.begin(), expect.end(), 0);
  CHECK(all == expect);
}

namespace {

// save() into an archive and load() it back in `to` (another sampler).
void round_trip(const nano::EpochShardSampler& from, nano::EpochShardSampler& to) {
  std::stringstream bytes;
  torch::serialize::OutputArchive out;
  from.save(out);
  out.save_to(bytes);
  torch::serialize::InputArchive in;
  in.load_from(bytes);
  to.load(in);
}

std::vector<std::size_t> drain(nano::EpochShardSampler& sampler, std::size_t batch) {
  std::vector<std::size_t> all;
  while (auto indices = sampler.next(batch)) all.insert(all.end(), indices->begin(), indices->end());
  return all;
}

}  // namespace

TEST_CASE("sampler save/load: the epoch, the order being walked, and one-line errors for foreign archives") {
  auto comm = std::make_shared<nano::SelfCommunicator>();
  auto balanced = [&](std::size_t size) {
    return nano::EpochShardSampler(size, 0, 1, true, true,
                                   std::make_shared<nano::BatchBalancer>(comm, 4, nano::BalanceHooks{}));
  };

  // Saved before its first epoch: loads as one that has not started, and walks epoch 0.
  auto fresh = balanced(10), reference = balanced(10), loaded = balanced(10);
  round_trip(fresh, loaded);
  CHECK(loaded.epoch() == 0);
  loaded.reset();
  reference.reset();
  CHECK(drain(loaded, 4) == drain(reference, 4));

  // set_epoch() between reset() and save() changes the next epoch, not the order being walked.
  auto walking = balanced(10), resumed = balanced(10);
  walking.reset();
  walking.reset();  // walks epoch 1's order
  std::vector<std::size_t> seen = *walking.next(4);
  walking.set_epoch(7);
  round_trip(walking, resumed);
  CHECK(resumed.epoch() == 7);
  const std::vector<std::size_t> rest = drain(resumed, 4);
  CHECK(rest == drain(walking, 4));
  seen.insert(seen.end(), rest.begin(), rest.end());
  std::sort(seen.begin(), seen.end());
  std::vector<std::size_t> expect(10);
  std::iota(expect.begin(), expect.end(), std::size_t{0});
  CHECK(seen == expect);

  // Another dataset's position, or an archive without one, is refused in one line.
  auto larger = balanced(12);
  CHECK_THROWS_WITH_AS(round_trip(walking, larger),
                       "nano: EpochShardSampler: the saved position is over 10 samples, this sampler's dataset has 12",
                       nano::Error);
  {
    // A damaged archive: a negative count is named, not cast to a huge position.
    std::stringstream bytes;
    torch::serialize::OutputArchive out;
    out.write("nano_epoch", torch::tensor(int64_t{-1}), /*is_buffer=*/true);
    out.save_to(bytes);
    torch::serialize::InputArchive in;
    in.load_from(bytes);
    CHECK_THROWS_WITH_AS(loaded.load(in), "nano: EpochShardSampler: bad saved nano_epoch=-1: expected >= 0",
                         nano::Error);
  }
  nano::EpochShardSampler equal(10, 0, 1, true);
  CHECK_THROWS_WITH_AS(round_trip(equal, loaded),
                       "nano: EpochShardSampler: the archive has no nano_balanced_order (it was not saved by a "
                       "balanced EpochShardSampler)",
                       nano::Error);

  // Without a balancer the epoch travels too, so the next reset() reshuffles as the original would.
  nano::EpochShardSampler original(10, 0, 2, true), restored(10, 0, 2, true);
  original.reset();
  original.reset();
  round_trip(original, restored);
  CHECK(restored.epoch() == 2);
  CHECK(drain(restored, 2) == drain(original, 2));
  original.reset();
  restored.reset();
  CHECK(drain(restored, 2) == drain(original, 2));
}

TEST_CASE("after load(), a DataLoader's reset() continues the saved pass; replay hands out finished passes empty") {
  auto comm = std::make_shared<nano::SelfCommunicator>();
  auto balanced = [&] {
    return nano::EpochShardSampler(12, 0, 1, true, true,
                                   std::make_shared<nano::BatchBalancer>(comm, 4, nano::BalanceHooks{}));
  };
  for (const bool with_balancer : {true, false}) {
    CAPTURE(with_balancer);
    auto make = [&] { return with_balancer ? balanced() : nano::EpochShardSampler(12, 0, 1, true); };
    // The original: pass 1 whole, pass 2 one batch in when it is saved, then the rest.
    auto original = make();
    original.reset();
    drain(original, 4);
    original.reset();
    const std::vector<std::size_t> first = *original.next(4);
    auto plain = make(), replaying = make();
    round_trip(original, plain);
    round_trip(original, replaying);
    CHECK(plain.passes() == 2);
    const std::vector<std::size_t> rest = drain(original, 4);
    original.reset();
    const std::vector<std::size_t> third = drain(original, 4);

    // Plain API: the loader's begin() continues the saved pass, the next one is new.
    plain.reset();
    CHECK(drain(plain, 4) == rest);
    plain.reset();
    CHECK(drain(plain, 4) == third);

    // In-program resume: the training loop runs from its start, pass 1 is handed out empty.
    replaying.replay_done_passes();
    replaying.reset();
    CHECK(replaying.next(4) == torch::nullopt);
    replaying.reset();
    CHECK(drain(replaying, 4) == rest);
    replaying.reset();
    CHECK(drain(replaying, 4) == third);
    CHECK(first.size() == 4);
  }
}

TEST_CASE("max_batches ends every pass, a resumed one where the original would have") {
  nano::EpochShardSampler capped(40, 0, 1, false, true, nullptr, false, /*max_batches=*/3);
  capped.reset();
  CHECK(capped.next(4)->front() == 0);
  nano::EpochShardSampler resumed(40, 0, 1, false, true, nullptr, false, 3);
  round_trip(capped, resumed);
  resumed.reset();
  CHECK(drain(resumed, 4).size() == 8);  // batches 2 and 3 of the pass
  resumed.reset();
  CHECK(drain(resumed, 4).size() == 12);
}

TEST_CASE("a saved split resumes with the same ranks; positions refuse what they cannot continue") {
  auto comm = std::make_shared<nano::SelfCommunicator>();
  nano::BatchBalancer balancer(comm, 10, nano::BalanceHooks{});
  CHECK_FALSE(balancer.resume_split({5, 5}));  // another world's
  CHECK_FALSE(balancer.resume_split({9}));     // does not sum to the global batch
  CHECK(balancer.resume_split({10}));
  CHECK(balancer.split() == std::vector<int64_t>{10});

  // An equal shard's position belongs to its world size.
  nano::EpochShardSampler two(12, 0, 2, true), three(12, 0, 3, true);
  two.reset();
  CHECK_THROWS_WITH_AS(round_trip(two, three),
                       "nano: EpochShardSampler: the position was saved by one of 2 ranks without a batch balancer and "
                       "cannot resume with 3 (a balanced loader's can)",
                       nano::Error);
  auto balanced = nano::EpochShardSampler(12, 0, 1, true, true,
                                          std::make_shared<nano::BatchBalancer>(comm, 4, nano::BalanceHooks{}));
  nano::EpochShardSampler equal(12, 0, 1, true);
  CHECK_THROWS_WITH_AS(round_trip(balanced, equal),
                       "nano: EpochShardSampler: the position was saved by a balanced sampler; resume with a batch "
                       "balancer too",
                       nano::Error);
}
