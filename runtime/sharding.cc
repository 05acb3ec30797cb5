#include "runtime/sharding.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace nano {

EpochShardSampler::EpochShardSampler(std::size_t size, int rank, int world_size, bool shuffle,
                                     bool allow_duplicates, std::shared_ptr<BatchBalancer> balancer, bool drop_last)
    : shuffle_(shuffle),
      random_(size, world_size, rank, allow_duplicates),
      sequential_(size, world_size, rank, allow_duplicates),
      balancer_(std::move(balancer)),
      size_(size),
      world_size_(static_cast<std::size_t>(world_size)),
      allow_duplicates_(allow_duplicates),
      drop_last_(drop_last) {}

void EpochShardSampler::reset(torch::optional<std::size_t> new_size) {
  if (!balancer_) {
    if (shuffle_) {
      random_.set_epoch(epoch_++);
      random_.reset(new_size);
    } else {
      sequential_.reset(new_size);
    }
    return;
  }
  if (new_size) size_ = *new_size;
  build_order(epoch_);
  if (shuffle_) ++epoch_;
  position_ = 0;
  balancer_->epoch_begin();
}

void EpochShardSampler::build_order(std::size_t epoch) {
  order_seed_ = epoch;
  order_.resize(size_);
  std::iota(order_.begin(), order_.end(), std::size_t{0});
  // Every rank seeds with the epoch alone, so all of them walk the same order.
  if (shuffle_) std::shuffle(order_.begin(), order_.end(), std::mt19937_64(epoch));
}

torch::optional<std::vector<std::size_t>> EpochShardSampler::next(std::size_t batch_size) {
  if (!balancer_) return shuffle_ ? random_.next(batch_size) : sequential_.next(batch_size);
  if (size_ == 0) return torch::nullopt;
  // The padded epoch: as many samples as the equal shards would hand out in all.
  const std::size_t per_rank = allow_duplicates_ ? (size_ + world_size_ - 1) / world_size_ : size_ / world_size_;
  const std::size_t epoch_samples = per_rank * world_size_;
  const auto global = static_cast<std::size_t>(balancer_->global_batch());
  if (position_ >= epoch_samples) return torch::nullopt;
  const std::size_t count = std::min(global, epoch_samples - position_);
  if (drop_last_ && count < global) return torch::nullopt;
  const BatchBalancer::Slice slice = balancer_->next_step(static_cast<int64_t>(count));
  std::vector<std::size_t> indices(static_cast<std::size_t>(slice.length));
  for (std::size_t j = 0; j < indices.size(); ++j) {
    indices[j] = order_[(position_ + static_cast<std::size_t>(slice.begin) + j) % size_];
  }
  position_ += count;
  return indices;
}

namespace {

void write_count(torch::serialize::OutputArchive& archive, const char* key, std::size_t value) {
  archive.write(key, torch::tensor(static_cast<int64_t>(value), torch::kInt64), /*is_buffer=*/true);
}

// The count saved under `key`, or nullopt when the archive has none.
torch::optional<std::size_t> read_count(torch::serialize::InputArchive& archive, const char* key) {
  at::Tensor t = torch::empty({}, torch::kInt64);
  if (!archive.try_read(key, t, /*is_buffer=*/true)) return torch::nullopt;
  const int64_t value = t.item<int64_t>();
  if (value < 0) {
    throw Error(std::string("nano: EpochShardSampler: bad saved ") + key + "=" + std::to_string(value) +
                ": expected >= 0");
  }
  return static_cast<std::size_t>(value);
}

std::size_t require_count(torch::serialize::InputArchive& archive, const char* key) {
  const auto value = read_count(archive, key);
  if (!value) {
    throw Error(std::string("nano: EpochShardSampler: the archive has no ") + key +
                " (it was not saved by a balanced EpochShardSampler)");
  }
  return *value;
}

}  // namespace

// A balanced position is the whole epoch's: the next epoch number, the seed of the order being
// walked, how many samples all ranks have taken, and the dataset size. The split is not part
// of it (all ranks' balancers agree on it, and a fresh one starts equal), so resuming covers
// the rest of the epoch exactly once.
void EpochShardSampler::save(torch::serialize::OutputArchive& archive) const {
  write_count(archive, "nano_epoch", epoch_);
  if (!balancer_) {
    shuffle_ ? random_.save(archive) : sequential_.save(archive);
    return;
  }
  write_count(archive, "nano_balanced_order", order_.empty() ? 0 : order_seed_ + 1);  // 0: none built yet
  write_count(archive, "nano_balanced_position", position_);
  write_count(archive, "nano_balanced_size", size_);
}

void EpochShardSampler::load(torch::serialize::InputArchive& archive) {
  if (!balancer_) {
    shuffle_ ? random_.load(archive) : sequential_.load(archive);
    // Archives of libtorch's own samplers lack it; the epoch then stays as it was.
    if (const auto epoch = read_count(archive, "nano_epoch")) epoch_ = *epoch;
    return;
  }
  const std::size_t epoch = require_count(archive, "nano_epoch");
  const std::size_t order = require_count(archive, "nano_balanced_order");
  const std::size_t position = require_count(archive, "nano_balanced_position");
  const std::size_t size = require_count(archive, "nano_balanced_size");
  if (size != size_) {
    throw Error("nano: EpochShardSampler: the saved position is over " + std::to_string(size) +
                " samples, this sampler's dataset has " + std::to_string(size_));
  }
  epoch_ = epoch;
  position_ = position;
  order_.clear();
  if (order != 0) build_order(order - 1);
}

}  // namespace nano
