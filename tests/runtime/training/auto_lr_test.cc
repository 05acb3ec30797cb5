// auto_lr: table tests of the pure ratio, and the applier on real optimizers.
#include <cstdlib>
#include <string>

#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <nano/auto_lr.h>
#include <nano/batch_policy.h>
#include <nano/error.h>

// c10's logging defines a fatal CHECK; doctest's must win, so it comes last.
#undef CHECK
#include <doctest/doctest.h>

TEST_CASE("auto_lr_ratio: 1 + (N-1) * min(step, L) / L") {
  struct Row {
    int64_t step;
    int world;
    int64_t length;
    double ratio;
  };
  const std::vector<Row> rows = {
      {0, 4, 1000, 1.0},    {500, 4, 1000, 2.5}, {1000, 4, 1000, 4.0}, {5000, 4, 1000, 4.0}, {1, 2, 1000, 1.001},
      {250, 2, 1000, 1.25}, {3, 1, 1000, 1.0},   {10, 8, 10, 8.0},     {5, 3, 10, 2.0},      {-1, 3, 10, 1.0},
  };
  for (const auto& r : rows) {
    CAPTURE(r.step);
    CAPTURE(r.world);
    CHECK(nano::auto_lr_ratio(r.step, r.world, r.length) == doctest::Approx(r.ratio).epsilon(1e-15));
  }
}

TEST_CASE("auto_lr_length: steps, epochs, bad values") {
  nano::AutoLrOptions o;
  CHECK(nano::auto_lr_length(o) == 1000);
  o.warmup_steps = 40;
  CHECK(nano::auto_lr_length(o) == 40);
  o.warmup_epochs = 3;
  o.steps_per_epoch = 25;
  CHECK(nano::auto_lr_length(o) == 75);
  o.steps_per_epoch = 0;
  CHECK_THROWS_WITH_AS(nano::auto_lr_length(o),
                       "nano: auto_lr: bad steps_per_epoch=0: expected > 0 with warmup_epochs=3", nano::UsageError);
  nano::AutoLrOptions bad;
  bad.warmup_steps = 0;
  CHECK_THROWS_WITH_AS(nano::auto_lr_length(bad), "nano: auto_lr: bad warmup_steps=0: expected > 0", nano::UsageError);
}

TEST_CASE("AutoLr multiplies every param group's rate, step by step") {
  auto a = torch::zeros({2}, torch::requires_grad());
  auto b = torch::zeros({2}, torch::requires_grad());
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(std::vector<torch::Tensor>{a}, std::make_unique<torch::optim::AdamOptions>(0.01));
  groups.emplace_back(std::vector<torch::Tensor>{b}, std::make_unique<torch::optim::AdamOptions>(0.2));
  torch::optim::Adam adam(std::move(groups), torch::optim::AdamOptions(0.5));
  nano::AutoLrOptions o;
  o.warmup_steps = 4;
  nano::AutoLr warm(adam, 3, o);
  for (int s = 0; s <= 6; ++s) {
    const double ratio = 1.0 + 2.0 * std::min(s, 4) / 4.0;
    CAPTURE(s);
    CHECK(warm.ratio() == ratio);
    CHECK(adam.param_groups()[0].options().get_lr() == doctest::Approx(0.01 * ratio).epsilon(1e-15));
    CHECK(adam.param_groups()[1].options().get_lr() == doctest::Approx(0.2 * ratio).epsilon(1e-15));
    warm.step();
  }
}

TEST_CASE("AutoLr composes with a user schedule that scales the rate") {
  auto p = torch::zeros({1}, torch::requires_grad());
  torch::optim::SGD sgd({p}, torch::optim::SGDOptions(1.0));
  nano::AutoLrOptions o;
  o.warmup_steps = 2;
  nano::AutoLr warm(sgd, 2, o);
  auto lr = [&] { return sgd.param_groups()[0].options().get_lr(); };
  warm.step();  // ratio 1.5
  CHECK(lr() == doctest::Approx(1.5));
  // The user's step decay halves the (warmed) rate: the base becomes 0.5.
  sgd.param_groups()[0].options().set_lr(lr() * 0.5);
  CHECK(warm.base_lr(0) == doctest::Approx(0.5));
  warm.step();  // ratio 2
  CHECK(lr() == doctest::Approx(1.0));
  warm.step();
  CHECK(lr() == doctest::Approx(1.0));
}

TEST_CASE("AutoLr off, or a world of one, leaves the rate alone") {
  auto p = torch::zeros({1}, torch::requires_grad());
  torch::optim::SGD sgd({p}, torch::optim::SGDOptions(0.3));
  nano::AutoLrOptions off;
  off.enabled = false;
  nano::AutoLr a(sgd, 4, off);
  nano::AutoLr b(sgd, 1);
  for (int s = 0; s < 5; ++s) {
    a.step();
    b.step();
    CHECK(sgd.param_groups()[0].options().get_lr() == 0.3);
  }
}

TEST_CASE("per_rank_batch and batch_world_size: the global batch policy of an elastic world") {
  struct Row {
    std::size_t batch;
    int batch_world, world;
    std::size_t expected;
  };
  const Row rows[] = {
      {32, 3, 3, 32},                                 // the first world: as written
      {32, 3, 2, 48},                                 // 96 samples a step over 2 ranks
      {32, 2, 3, 22},                                 // 64 over 3: rounded up (66)
      {32, 4, 1, 128}, {1, 3, 2, 2}, {32, 0, 2, 32},  // no first world given: as written
  };
  for (const Row& r : rows) {
    CAPTURE(r.batch_world);
    CAPTURE(r.world);
    CHECK(nano::per_rank_batch(r.batch, r.batch_world, r.world) == r.expected);
  }
  unsetenv("NANO_BATCH_WORLD_SIZE");
  CHECK(nano::batch_world_size(2) == 2);
  setenv("NANO_BATCH_WORLD_SIZE", "3", 1);
  CHECK(nano::batch_world_size(2) == 3);
  for (const char* bad : {"0", "x", "3x", "-2"}) {
    setenv("NANO_BATCH_WORLD_SIZE", bad, 1);
    CHECK_THROWS_WITH_AS(nano::batch_world_size(2),
                         (std::string("nano: bad NANO_BATCH_WORLD_SIZE=") + bad + ": expected a count >= 1").c_str(),
                         nano::UsageError);
  }
  unsetenv("NANO_BATCH_WORLD_SIZE");
}
