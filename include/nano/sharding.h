#pragma once
// Data sharding: a libtorch DataLoader whose sampler gives each rank a disjoint 1/N of the
// dataset (libtorch's distributed samplers), reshuffled each epoch. The per-rank batch size
// stays what the user wrote, so the global batch is N times larger; with a BatchBalancer
// (<nano/load_balance.h>) each global batch is instead cut by the ranks' measured speed.
#include <torch/data.h>
#include <torch/data/samplers/base.h>
#include <torch/data/samplers/distributed.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <nano/context.h>
#include <nano/error.h>
#include <nano/load_balance.h>
#include <nano/precision.h>

namespace nano {

class EpochShardSampler;

/// When an EpochShardSampler calls its hook: at the start of a pass (reset(), the loader's
/// begin()), before handing out a batch (next(), also the call that ends a pass) — both
/// between training steps in a loop over the loader — after the call that ends a pass (once
/// per pass, an empty one included), and from its destructor.
enum class SamplerEvent { kPassStart, kBatch, kPassEnd, kGone };
using SamplerHook = std::function<void(EpochShardSampler&, SamplerEvent)>;

struct ShardOptions {
  bool shuffle = true;           ///< DistributedRandomSampler (reshuffled per epoch), else sequential
  bool allow_duplicates = true;  ///< pad so every rank gets ceil(size/N) samples (same step count)
  bool drop_last = false;
  std::size_t workers = 0;
  /// Hand out at most this many batches per pass (epoch), like a capped loop but known to the
  /// sampler, so a resumed epoch stops where the original would have. 0 = the whole epoch.
  std::size_t max_batches = 0;
  /// Split each global batch (N x batch_size) among the ranks by their measured speed instead
  /// of equally (see <nano/load_balance.h>; make one with make_batch_balancer). Per-rank
  /// batches then differ (their sum does not); needs workers == 0. Null: equal shards.
  std::shared_ptr<BatchBalancer> balancer;
  /// Called by the loader's sampler between training steps (see EpochShardSampler::Event);
  /// nano's in-program checkpoints use it. Empty: none.
  SamplerHook hook;
  /// The dtype and memory format of the tensors in the batches handed out (TorchNano's
  /// precision and channels_last set it); the default changes nothing.
  BatchFormat format;
};

namespace detail {
/// A batch's tensors in `format`: a tensor, an Example's data and target, each element of a
/// vector of them; anything else as it is.
inline void format_batch(at::Tensor& batch, const BatchFormat& format) { batch = formatted(batch, format); }
template <class Data, class Target>
void format_batch(torch::data::Example<Data, Target>& batch, const BatchFormat& format) {
  format_batch(batch.data, format);
  if constexpr (!std::is_void_v<Target>) format_batch(batch.target, format);  // TensorExample has none
}
template <class T>
void format_batch(std::vector<T>& batch, const BatchFormat& format) {
  for (T& one : batch) format_batch(one, format);
}
template <class Other>
void format_batch(Other&, const BatchFormat&) {}

/// A nano loader's batch is fetched and formatted (the timeline's data phase ends).
void batch_ready();

/// The transform every nano loader maps its batches through.
template <class Batch>
class FormatBatch : public torch::data::transforms::BatchTransform<Batch, Batch> {
 public:
  explicit FormatBatch(BatchFormat format) : format_(format) {}
  Batch apply_batch(Batch batch) override {
    if (!format_.identity()) format_batch(batch, format_);
    batch_ready();
    return batch;
  }

 private:
  BatchFormat format_;
};

/// `dataset` with its batches in `format`. (Made directly: libtorch's map() cannot take a
/// dataset whose batch is one Example, as a Stack<>-mapped dataset's is.)
template <class Dataset>
auto formatted_dataset(Dataset dataset, const BatchFormat& format) {
  using Batch = typename Dataset::BatchType;
  return torch::data::datasets::MapDataset<Dataset, FormatBatch<Batch>>(std::move(dataset), FormatBatch<Batch>(format));
}
}  // namespace detail

/// A distributed sampler that advances its epoch at every reset() (each pass over the loader
/// starts with one), so every rank reshuffles identically without user calls. set_epoch()
/// overrides the next epoch number.
/// With a balancer, every rank walks the same epoch order in global batches of
/// balancer's global size and takes the slice the balancer gives it (same steps per epoch as
/// the equal shards: ceil(size / N) samples per rank with duplicates, floor without).
/// save()/load() keep the epoch number, the position within the epoch, the passes started and
/// the balancer's split. After load(), the pass in progress continues: by next() at once, or
/// at the next reset() (a DataLoader's begin()) instead of a new epoch. A balanced sampler's
/// position is the whole epoch's, so every rank saves the same one and the rest of the epoch is
/// covered exactly once after a load, whatever the world size then; load() throws nano::Error
/// for an archive without it or one saved over a dataset of another size.
class EpochShardSampler : public torch::data::samplers::Sampler<> {
 public:
  /// `max_batches` per pass (0 = all); `hook` as in ShardOptions.
  EpochShardSampler(std::size_t size, int rank, int world_size, bool shuffle, bool allow_duplicates = true,
                    std::shared_ptr<BatchBalancer> balancer = nullptr, bool drop_last = false,
                    std::size_t max_batches = 0, SamplerHook hook = nullptr);
  EpochShardSampler(EpochShardSampler&&) = default;
  EpochShardSampler& operator=(EpochShardSampler&&) = default;
  /// Calls the hook with kGone once it has been called for this object.
  ~EpochShardSampler() override;

  void reset(torch::optional<std::size_t> new_size = torch::nullopt) override;
  torch::optional<std::vector<std::size_t>> next(std::size_t batch_size) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;
  void set_epoch(std::size_t epoch) { epoch_ = epoch; }
  std::size_t epoch() const { return epoch_; }
  /// Passes (reset() calls that started one) so far, the loaded ones included.
  std::size_t passes() const { return passes_; }
  /// For a training function run again from its start after a load() (in-program resume): the
  /// passes before the loaded one are handed out empty, so an unchanged `for epoch: for batch`
  /// loop trains exactly what was left. Call after load().
  void replay_done_passes() { replay_ = resume_pending_ && passes_ > 0 ? passes_ - 1 : 0; }
  /// Batches of the pass in progress that were handed out before the load() that continued it
  /// (a resumed run's progress display starts after them); 0 for a pass begun since.
  std::size_t resumed_batches() const { return loaded_pass_ > 0 && passes_ == loaded_pass_ ? loaded_batches_ : 0; }

 private:
  void call_hook(SamplerEvent event);
  torch::optional<std::vector<std::size_t>> next_indices(std::size_t batch_size);
  bool pass_ended_ = false;
  void load_progress(torch::serialize::InputArchive& archive);
  std::size_t max_batches_;
  SamplerHook hook_;
  bool hooked_ = false;  // the hook has seen this object (so it also hears kGone)
  std::size_t passes_ = 0;
  std::size_t batches_ = 0;       // batches of the current pass handed out
  std::size_t pass_samples_ = 0;  // equal shards: samples of the current pass handed out
  std::size_t pass_epoch_ = 0;    // equal shards: the shuffle seed of the current pass
  bool resume_pending_ = false;   // load() happened; the next reset() continues the loaded pass
  std::size_t replay_ = 0;        // empty passes still to hand out before the loaded one
  std::size_t loaded_pass_ = 0;   // the pass a load() continued, and its batches then
  std::size_t loaded_batches_ = 0;
  bool empty_pass_ = false;
  bool shuffle_;
  std::size_t epoch_ = 0;
  torch::data::samplers::DistributedRandomSampler random_;
  torch::data::samplers::DistributedSequentialSampler sequential_;
  // Balanced mode only.
  std::shared_ptr<BatchBalancer> balancer_;
  std::size_t size_;
  std::size_t world_size_;
  bool allow_duplicates_;
  bool drop_last_;
  void build_order(std::size_t epoch);
  std::vector<std::size_t> order_;  // this epoch's order of the whole dataset (same on every rank)
  std::size_t order_seed_ = 0;      // the epoch number order_ was shuffled with
  std::size_t position_ = 0;        // samples of the padded epoch already handed out (all ranks)
};

/// Builds a DataLoader over rank `rank`'s shard of `dataset` (a sized, stateless libtorch
/// dataset, usually already `.map(...)`ped), `batch_size` samples per rank per step, its
/// batches in options.format.
/// Throws UsageError for an unsized dataset or a bad rank/world/batch size.
template <class Dataset>
auto make_sharded_loader(Dataset dataset, int rank, int world_size, std::size_t batch_size,
                         const ShardOptions& options = {}) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw UsageError("nano: make_sharded_loader: bad rank " + std::to_string(rank) + " of world " +
                     std::to_string(world_size));
  }
  if (batch_size == 0) throw UsageError("nano: make_sharded_loader: bad batch_size=0: expected > 0");
  if (options.balancer && options.workers > 0) {
    throw UsageError("nano: make_sharded_loader: bad workers=" + std::to_string(options.workers) +
                     " with a batch balancer: balancing needs workers=0 (it times each step)");
  }
  if (options.balancer && (options.balancer->ranks() != world_size || options.balancer->rank() != rank ||
                           options.balancer->global_batch() != static_cast<int64_t>(batch_size) * world_size)) {
    throw UsageError(
        "nano: make_sharded_loader: the batch balancer splits " + std::to_string(options.balancer->global_batch()) +
        " samples over " + std::to_string(options.balancer->ranks()) + " ranks, but the loader is rank " +
        std::to_string(rank) + " of " + std::to_string(world_size) + " with batch_size " + std::to_string(batch_size));
  }
  const auto size = dataset.size();
  if (!size.has_value()) {
    throw UsageError("nano: make_sharded_loader: the dataset has no size, so it cannot be sharded");
  }
  return torch::data::make_data_loader(
      detail::formatted_dataset(std::move(dataset), options.format),
      EpochShardSampler(*size, rank, world_size, options.shuffle, options.allow_duplicates, options.balancer,
                        options.drop_last, options.max_batches, options.hook),
      // A balanced sampler hands out uneven batches and applies drop_last itself.
      torch::data::DataLoaderOptions(batch_size)
          .workers(options.workers)
          .drop_last(options.drop_last && !options.balancer));
}

/// The same for a World from nano::init().
template <class Dataset>
auto make_sharded_loader(Dataset dataset, const World& world, std::size_t batch_size,
                         const ShardOptions& options = {}) {
  return make_sharded_loader(std::move(dataset), world.rank(), world.size(), batch_size, options);
}

}  // namespace nano
