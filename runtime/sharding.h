#pragma once
// Data sharding: a libtorch DataLoader whose sampler gives each rank a disjoint 1/N of the
// dataset (libtorch's distributed samplers), reshuffled each epoch. The per-rank batch size
// stays what the user wrote, so the global batch is N times larger.
#include <torch/data.h>
#include <torch/data/samplers/base.h>
#include <torch/data/samplers/distributed.h>

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "env-init/error.h"
#include "runtime/context.h"

namespace nano {

struct ShardOptions {
  bool shuffle = true;            ///< DistributedRandomSampler (reshuffled per epoch), else sequential
  bool allow_duplicates = true;   ///< pad so every rank gets ceil(size/N) samples (same step count)
  bool drop_last = false;
  std::size_t workers = 0;
};

/// A distributed sampler that advances its epoch at every reset() (each pass over the loader
/// starts with one), so every rank reshuffles identically without user calls. set_epoch()
/// overrides the next epoch number.
class EpochShardSampler : public torch::data::samplers::Sampler<> {
 public:
  EpochShardSampler(std::size_t size, int rank, int world_size, bool shuffle,
                    bool allow_duplicates = true)
      : shuffle_(shuffle),
        random_(size, world_size, rank, allow_duplicates),
        sequential_(size, world_size, rank, allow_duplicates) {}

  void reset(torch::optional<std::size_t> new_size = torch::nullopt) override {
    if (shuffle_) {
      random_.set_epoch(epoch_++);
      random_.reset(new_size);
    } else {
      sequential_.reset(new_size);
    }
  }
  torch::optional<std::vector<std::size_t>> next(std::size_t batch_size) override {
    return shuffle_ ? random_.next(batch_size) : sequential_.next(batch_size);
  }
  void save(torch::serialize::OutputArchive& archive) const override {
    shuffle_ ? random_.save(archive) : sequential_.save(archive);
  }
  void load(torch::serialize::InputArchive& archive) override {
    shuffle_ ? random_.load(archive) : sequential_.load(archive);
  }
  void set_epoch(std::size_t epoch) { epoch_ = epoch; }
  std::size_t epoch() const { return epoch_; }

 private:
  bool shuffle_;
  std::size_t epoch_ = 0;
  torch::data::samplers::DistributedRandomSampler random_;
  torch::data::samplers::DistributedSequentialSampler sequential_;
};

/// Builds a DataLoader over rank `rank`'s shard of `dataset` (a sized, stateless libtorch
/// dataset, usually already `.map(...)`ped), `batch_size` samples per rank per step.
/// Throws UsageError for an unsized dataset or a bad rank/world/batch size.
template <class Dataset>
auto make_sharded_loader(Dataset dataset, int rank, int world_size, std::size_t batch_size,
                         const ShardOptions& options = {}) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw UsageError("nano: make_sharded_loader: bad rank " + std::to_string(rank) +
                     " of world " + std::to_string(world_size));
  }
  if (batch_size == 0) throw UsageError("nano: make_sharded_loader: bad batch_size=0: expected > 0");
  const auto size = dataset.size();
  if (!size.has_value()) {
    throw UsageError("nano: make_sharded_loader: the dataset has no size, so it cannot be sharded");
  }
  return torch::data::make_data_loader(
      std::move(dataset),
      EpochShardSampler(*size, rank, world_size, options.shuffle, options.allow_duplicates),
      torch::data::DataLoaderOptions(batch_size).workers(options.workers).drop_last(options.drop_last));
}

/// The same for a World from nano::init().
template <class Dataset>
auto make_sharded_loader(Dataset dataset, const World& world, std::size_t batch_size,
                         const ShardOptions& options = {}) {
  return make_sharded_loader(std::move(dataset), world.rank(), world.size(), batch_size, options);
}

}  // namespace nano
