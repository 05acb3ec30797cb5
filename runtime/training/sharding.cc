#include <nano/sharding.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "runtime/timeline/recorder.h"
#include "runtime/timeline/step_report.h"

namespace nano {

EpochShardSampler::EpochShardSampler(std::size_t size, int rank, int world_size, bool shuffle, bool allow_duplicates,
                                     std::shared_ptr<BatchBalancer> balancer, bool drop_last, std::size_t max_batches,
                                     SamplerHook hook)
    : max_batches_(max_batches),
      hook_(std::move(hook)),
      shuffle_(shuffle),
      random_(size, world_size, rank, allow_duplicates),
      sequential_(size, world_size, rank, allow_duplicates),
      balancer_(std::move(balancer)),
      size_(size),
      world_size_(static_cast<std::size_t>(world_size)),
      allow_duplicates_(allow_duplicates),
      drop_last_(drop_last) {}

EpochShardSampler::~EpochShardSampler() {
  if (hooked_ && hook_) hook_(*this, SamplerEvent::kGone);
}

namespace detail {
void batch_ready() { timeline::data_end(); }
}  // namespace detail

void EpochShardSampler::call_hook(SamplerEvent event) {
  if (!hook_) return;
  hooked_ = true;
  hook_(*this, event);
}

void EpochShardSampler::reset(torch::optional<std::size_t> new_size) {
  call_hook(SamplerEvent::kPassStart);  // may load() this sampler (an in-program resume)
  empty_pass_ = false;
  pass_ended_ = false;
  if (resume_pending_) {
    if (replay_ > 0) {  // a pass the loaded run had already finished
      --replay_;
      empty_pass_ = true;
      return;
    }
    resume_pending_ = false;
    if (passes_ > 0) {  // the loaded pass goes on from its position
      if (balancer_) balancer_->epoch_begin();
      return;
    }
  }
  ++passes_;
  batches_ = 0;
  pass_samples_ = 0;
  if (!balancer_) {
    if (shuffle_) {
      pass_epoch_ = epoch_++;
      random_.set_epoch(pass_epoch_);
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
  timeline::data_begin();  // ends when the batch is formatted (batch_ready)
  call_hook(SamplerEvent::kBatch);
  auto indices = next_indices(batch_size);
  if (indices) step_report::loader_batch(indices->size());
  if (!indices && !pass_ended_) {
    pass_ended_ = true;
    call_hook(SamplerEvent::kPassEnd);
  }
  return indices;
}

torch::optional<std::vector<std::size_t>> EpochShardSampler::next_indices(std::size_t batch_size) {
  if (empty_pass_) return torch::nullopt;
  resume_pending_ = false;  // next() right after load() continues the loaded pass itself
  replay_ = 0;
  if (max_batches_ > 0 && batches_ >= max_batches_) return torch::nullopt;
  if (!balancer_) {
    auto indices = shuffle_ ? random_.next(batch_size) : sequential_.next(batch_size);
    if (indices) {
      ++batches_;
      pass_samples_ += indices->size();
    }
    return indices;
  }
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
  ++batches_;
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
  write_count(archive, "nano_world", world_size_);
  write_count(archive, "nano_passes", passes_);
  write_count(archive, "nano_pass_batches", batches_);
  if (!balancer_) {
    // libtorch's own state (for readers that know only it) holds this rank's absolute index;
    // nano's is the pass's seed and count, which rebuild the position on whichever rank loads
    // it (a checkpoint holds rank 0's sampler for every rank).
    shuffle_ ? random_.save(archive) : sequential_.save(archive);
    write_count(archive, "nano_pass_epoch", pass_epoch_);
    write_count(archive, "nano_pass_samples", pass_samples_);
    return;
  }
  write_count(archive, "nano_balanced_order", order_.empty() ? 0 : order_seed_ + 1);  // 0: none built yet
  write_count(archive, "nano_balanced_position", position_);
  write_count(archive, "nano_balanced_size", size_);
  // The split as it was, so a resume with the same ranks does not start from the equal one.
  archive.write("nano_balanced_split", torch::tensor(balancer_->split(), torch::kInt64), /*is_buffer=*/true);
}

void EpochShardSampler::load_progress(torch::serialize::InputArchive& archive) {
  // Archives from before these were saved (or of libtorch's samplers) have none: then the
  // next reset() simply starts a new pass, as it used to.
  const auto passes = read_count(archive, "nano_passes");
  passes_ = passes.value_or(0);
  batches_ = read_count(archive, "nano_pass_batches").value_or(0);
  resume_pending_ = passes.has_value();
  loaded_pass_ = passes_;
  loaded_batches_ = batches_;
  replay_ = 0;
  empty_pass_ = false;
}

void EpochShardSampler::load(torch::serialize::InputArchive& archive) {
  if (!balancer_) {
    // An equal shard's position is this rank's own: it means nothing in another world.
    const auto world = read_count(archive, "nano_world");
    if (world && *world != world_size_) {
      throw Error("nano: EpochShardSampler: the position was saved by one of " + std::to_string(*world) +
                  " ranks without a batch balancer and cannot resume with " + std::to_string(world_size_) +
                  " (a balanced loader's can)");
    }
    if (read_count(archive, "nano_balanced_position")) {
      throw Error(
          "nano: EpochShardSampler: the position was saved by a balanced sampler; resume with a batch "
          "balancer too");
    }
    const auto samples = read_count(archive, "nano_pass_samples");
    if (!samples) {
      shuffle_ ? random_.load(archive) : sequential_.load(archive);
      // Archives of libtorch's own samplers lack it; the epoch then stays as it was.
      if (const auto epoch = read_count(archive, "nano_epoch")) epoch_ = *epoch;
      load_progress(archive);
      return;
    }
    epoch_ = require_count(archive, "nano_epoch");
    pass_epoch_ = require_count(archive, "nano_pass_epoch");
    load_progress(archive);
    // This rank's shard of the saved pass, walked up to the saved count.
    if (shuffle_) {
      random_.set_epoch(pass_epoch_);
      random_.reset();
      if (*samples > 0) random_.next(*samples);
    } else {
      sequential_.reset();
      if (*samples > 0) sequential_.next(*samples);
    }
    pass_samples_ = *samples;
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
  load_progress(archive);
  at::Tensor split = torch::empty({0}, torch::kInt64);
  if (archive.try_read("nano_balanced_split", split, /*is_buffer=*/true)) {
    balancer_->resume_split(std::vector<int64_t>(split.data_ptr<int64_t>(), split.data_ptr<int64_t>() + split.numel()));
  }
}

}  // namespace nano
