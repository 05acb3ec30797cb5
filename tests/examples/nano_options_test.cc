#include "examples/common/nano_options.h"

#include <doctest/doctest.h>

using namespace nano::examples;

TEST_CASE("rank_steps_per_epoch: each rank's padded shard in batches, capped") {
  ExampleOptions o;
  o.batch_size = 64;
  CHECK(rank_steps_per_epoch(o, 60000, 1) == 938);
  CHECK(rank_steps_per_epoch(o, 60000, 2) == 469);
  CHECK(rank_steps_per_epoch(o, 60000, 7) == 134);  // shard ceil(60000/7) = 8572 -> 134 batches
  o.max_steps_per_epoch = 3;
  CHECK(rank_steps_per_epoch(o, 60000, 2) == 3);
}

TEST_CASE("fashion_mnist_nano_options: ranks, backend and the warm-up in epochs") {
  ExampleOptions o;
  o.num_processes = 2;
  o.backend = "mpi";
  nano::TorchNanoOptions n = fashion_mnist_nano_options(o, 469);
  CHECK(n.num_processes == 2);
  CHECK(n.distributed_backend == "mpi");
  CHECK(n.auto_lr.options.enabled);
  CHECK(n.auto_lr.options.warmup_epochs == kFashionMnistWarmupEpochs);
  CHECK(n.auto_lr.options.steps_per_epoch == 469);
  CHECK(n.balance_batches);
  o.balance = false;
  CHECK_FALSE(fashion_mnist_nano_options(o, 469).balance_batches);
  o.auto_lr = false;
  CHECK_FALSE(fashion_mnist_nano_options(o, 0).auto_lr.options.enabled);
  CHECK(fashion_mnist_nano_options(o, 0).auto_lr.options.steps_per_epoch == 1);
}
