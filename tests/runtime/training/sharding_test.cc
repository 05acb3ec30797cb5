// Sharded loaders in one process: each rank's loader built side by side.
#include <torch/data/datasets/tensor.h>
#include <torch/data/transforms/stack.h>

#include <algorithm>
#include <set>

#include <nano/error.h>
#include <nano/sharding.h>

// c10's logging defines a fatal CHECK; doctest's must win, so it comes last.
#undef CHECK
#include <doctest/doctest.h>

namespace {

auto dataset(int64_t n) {
  return torch::data::datasets::TensorDataset(torch::arange(0, n, torch::kLong))
      .map(torch::data::transforms::Stack<torch::data::TensorExample>());
}

std::vector<std::vector<int64_t>> epoch_of(int world, int64_t n, size_t batch, int epochs, bool shuffle = true) {
  // result[epoch * world + rank] = the indexes that rank saw in that epoch
  std::vector<std::vector<int64_t>> seen(epochs * world);
  for (int r = 0; r < world; ++r) {
    nano::ShardOptions o;
    o.shuffle = shuffle;
    auto loader = nano::make_sharded_loader(dataset(n), r, world, batch, o);
    for (int e = 0; e < epochs; ++e) {
      for (auto& b : *loader) {
        CHECK(static_cast<size_t>(b.data.size(0)) <= batch);
        for (int64_t i = 0; i < b.data.size(0); ++i) seen[e * world + r].push_back(b.data[i].item<int64_t>());
      }
    }
  }
  return seen;
}

}  // namespace

TEST_CASE("shards are disjoint, cover the data, and reshuffle each epoch") {
  const int world = 4;
  auto seen = epoch_of(world, 64, 5, 3);
  for (int e = 0; e < 3; ++e) {
    std::vector<int64_t> all;
    for (int r = 0; r < world; ++r) {
      CHECK(seen[e * world + r].size() == 16);
      all.insert(all.end(), seen[e * world + r].begin(), seen[e * world + r].end());
    }
    std::sort(all.begin(), all.end());
    std::vector<int64_t> expect(64);
    for (int i = 0; i < 64; ++i) expect[i] = i;
    CHECK((all == expect));
  }
  CHECK(seen[0] != seen[world]);  // rank 0, epoch 0 vs epoch 1
}

TEST_CASE("uneven sizes are padded so every rank takes the same number of steps") {
  auto seen = epoch_of(3, 10, 2, 1);
  for (int r = 0; r < 3; ++r) CHECK(seen[r].size() == 4);
}

TEST_CASE("sequential shards keep the data order") {
  auto seen = epoch_of(1, 4, 2, 1, false);
  CHECK((seen[0] == std::vector<int64_t>{0, 1, 2, 3}));
}

TEST_CASE("bad shard parameters") {
  CHECK_THROWS_WITH_AS(nano::make_sharded_loader(dataset(4), 2, 2, 1),
                       "nano: make_sharded_loader: bad rank 2 of world 2", nano::UsageError);
  CHECK_THROWS_WITH_AS(nano::make_sharded_loader(dataset(4), 0, 2, 0),
                       "nano: make_sharded_loader: bad batch_size=0: expected > 0", nano::UsageError);
}
