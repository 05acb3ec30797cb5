#include "examples/common/train.h"

#include <doctest/doctest.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <cstdio>

using namespace nano::examples;

TEST_CASE("batches, correct counts and loss") {
  CHECK(batches_per_epoch(60000, 64, 0) == 938);
  CHECK(batches_per_epoch(60000, 64, 5) == 5);
  CHECK(batches_per_epoch(128, 64, 0) == 2);
  CHECK(batches_per_epoch(10, 64, 0) == 1);
  const at::Tensor logits = at::tensor({0.1f, 0.9f, 0.8f, 0.2f, 0.3f, 0.7f}).view({3, 2});
  CHECK(count_correct(logits, at::tensor({int64_t{1}, int64_t{0}, int64_t{0}})) == 2);
  CHECK(classification_loss(at::zeros({4, 10}), at::zeros({4}, at::kLong)).item<double>() ==
        doctest::Approx(std::log(10.0)));
}

TEST_CASE("global_step_samples: N x batch, then what the padded epoch has left") {
  CHECK(global_step_samples(60000, 64, 2, 0) == 128);
  CHECK(global_step_samples(60000, 64, 2, 467) == 128);
  CHECK(global_step_samples(60000, 64, 2, 468) == 96);  // 60000 - 468 x 128
  CHECK(global_step_samples(60000, 64, 2, 469) == 0);
  CHECK(global_step_samples(10, 4, 3, 0) == 12);  // padded to 4 per rank: 12
  CHECK(global_step_samples(10, 4, 3, 1) == 0);
  CHECK(global_step_samples(60000, 64, 1, 937) == 32);
}

TEST_CASE("evaluation_shard: contiguous, complete, balanced") {
  struct Row {
    int64_t examples, limit;
    int rank, world;
    int64_t begin, length;
  };
  const Row rows[] = {
      {10000, 0, 0, 1, 0, 10000},
      {10000, 0, 0, 2, 0, 5000},
      {10000, 0, 1, 2, 5000, 5000},
      {10000, 500, 1, 2, 250, 250},
      {10000, 20000, 0, 1, 0, 10000},
      {10, 0, 0, 3, 0, 3},
      {10, 0, 1, 3, 3, 3},
      {10, 0, 2, 3, 6, 4},
      {1, 0, 0, 2, 0, 0},
      {1, 0, 1, 2, 0, 1},
  };
  for (const Row& r : rows) {
    CAPTURE(r.examples);
    CAPTURE(r.rank);
    const RowRange got = evaluation_shard(r.examples, r.limit, r.rank, r.world);
    CHECK(got.begin == r.begin);
    CHECK(got.length == r.length);
  }
}

TEST_CASE("evaluate counts arg-max hits in batches and leaves eval mode") {
  torch::nn::Linear identity(2, 2);
  {
    at::NoGradGuard g;
    identity->weight.copy_(at::eye(2));
    identity->bias.zero_();
  }
  const at::Tensor x = at::tensor({1.f, 0.f, 0.f, 1.f, 2.f, 1.f, 0.f, 3.f, 5.f, 4.f}).view({5, 2});
  const at::Tensor y = at::tensor({int64_t{0}, int64_t{1}, int64_t{1}, int64_t{1}, int64_t{0}});
  CHECK(evaluate(identity, x, y, 2) == doctest::Approx(0.8));  // row 2 (2 > 1) predicts 0, label 1
  CHECK_FALSE(identity->is_training());
}

TEST_CASE("train_one_epoch calls the step per batch, honours max_steps and learns") {
  // Two separable classes: x = +1 -> 0, x = -1 -> 1.
  const at::Tensor x = at::cat({at::ones({32, 1}), -at::ones({32, 1})});
  const at::Tensor y = at::cat({at::zeros({32}, at::kLong), at::ones({32}, at::kLong)});
  torch::nn::Linear model(1, 2);
  torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.5));
  int steps = 0;
  const StepFn step = [&](const at::Tensor& loss) {
    ++steps;
    opt.zero_grad();
    loss.backward();
    opt.step();
  };
  struct Batch {
    at::Tensor data, target;
  };
  std::vector<Batch> batches;
  for (int64_t b = 0; b < 8; ++b) {
    const at::Tensor idx = at::arange(b, 64, 8);  // each batch mixes both classes
    batches.push_back({x.index_select(0, idx), y.index_select(0, idx)});
  }
  std::FILE* quiet = std::tmpfile();
  ProgressPrinter p1(quiet, 1, 2, 3, false);
  const EpochResult first = train_one_epoch(model, batches, step, p1, 3);
  CHECK(steps == 3);
  CHECK(first.batches == 3);
  CHECK(first.images == 24);
  CHECK(model->is_training());
  ProgressPrinter p2(quiet, 2, 2, 8, false);
  const EpochResult second = train_one_epoch(model, batches, step, p2);
  std::fclose(quiet);
  CHECK(steps == 11);
  CHECK(second.images == 64);
  CHECK(second.mean_loss < first.mean_loss);
  CHECK(evaluate(model, x, y) == doctest::Approx(1.0));
}
