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
constexpr const char* kBalancedKeys[] = {"nano_balanced_epoch", "nano_balanced_position", "nano_balanced_size",
                                         "nano_balanced_ordered"};
}  // namespace

// A balanced position is the whole epoch's: the next epoch number, how many samples all ranks
// have taken, and the dataset size. The split is not part of it (all ranks' balancers agree
// on it, and a fresh one starts equal), so resuming covers the rest of the epoch exactly once.
void EpochShardSampler::save(torch::serialize::OutputArchive& archive) const {
  if (!balancer_) {
    shuffle_ ? random_.save(archive) : sequential_.save(archive);
    return;
  }
  const std::size_t values[] = {epoch_, position_, size_, order_.empty() ? 0u : 1u};
  for (std::size_t i = 0; i < 4; ++i) {
    archive.write(kBalancedKeys[i], torch::tensor(static_cast<int64_t>(values[i]), torch::kInt64),
                  /*is_buffer=*/true);
  }
}

void EpochShardSampler::load(torch::serialize::InputArchive& archive) {
  if (!balancer_) {
    shuffle_ ? random_.load(archive) : sequential_.load(archive);
    return;
  }
  int64_t values[4] = {};
  for (std::size_t i = 0; i < 4; ++i) {
    at::Tensor t = torch::empty({}, torch::kInt64);
    archive.read(kBalancedKeys[i], t, /*is_buffer=*/true);
    values[i] = t.item<int64_t>();
    if (values[i] < 0) {
      throw Error(std::string("nano: EpochShardSampler: bad saved ") + kBalancedKeys[i] + "=" +
                  std::to_string(values[i]) + ": expected >= 0");
    }
  }
  epoch_ = static_cast<std::size_t>(values[0]);
  position_ = static_cast<std::size_t>(values[1]);
  size_ = static_cast<std::size_t>(values[2]);
  order_.clear();
  if (values[3] != 0) build_order(shuffle_ && epoch_ > 0 ? epoch_ - 1 : epoch_);  // the epoch reset() began
}

}  // namespace nano
