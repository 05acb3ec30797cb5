#pragma once
// nano::nano(options)(training_loop)(args...): run an unchanged training function on
// several ranks. Arguments are recognised by type at compile time, in any position:
//   * the model: a torch::nn::ModuleHolder (torch::nn::Linear, a TORCH_MODULE) or a
//     std::shared_ptr to a torch::nn::Module: exactly one, else a compile-time error
//     (libtorch's loss modules, torch::nn::MSELoss etc., are loss functions, not models);
//   * optimizers: anything derived from torch::optim::Optimizer (by reference or through
//     a shared_ptr/unique_ptr), any number: auto_lr applies to each;
//   * loaders: nano::ShardableLoader<Dataset>, any number: each rank iterates its own
//     disjoint shard. A libtorch DataLoader cannot be sharded (its dataset and sampler are
//     private): passing one is a compile-time error rather than a silent full-data run;
//   * anything else (epochs, loss functions, ...) is passed through untouched.
// The caller re-executes this program as num_processes ranks and waits; each rank runs
// main() up to this same call, joins the world, wraps the model (DDP on the same module
// object), runs the function and exits; afterwards the caller's model holds rank 0's trained
// parameters and buffers, its optimizers hold rank 0's optimizer state, and the call returns
// rank 0's return value (void, a number, std::string or at::Tensor). A failed rank throws nano::RankFailedError. Under
// nano-run, mpirun or torchrun the call joins that world and returns each rank's own value.
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/data/dataloader/stateful.h>
#include <torch/data/dataloader/stateless.h>
#include <torch/nn/modules/loss.h>
#include <torch/optim/optimizer.h>

#include <nano/batch_policy.h>
#include <nano/in_program.h>
#include <nano/sharding.h>

namespace nano {

/// A data loader nano can shard: the dataset and batch size, built into a libtorch
/// StatelessDataLoader over the current shard on first use. Outside nano (or with one rank)
/// it iterates the whole dataset. Use it like a libtorch loader pointer or as a range:
/// `for (auto& batch : *loader)` and `for (auto& batch : loader)` both work.
template <class Dataset>
class ShardableLoader {
 public:
  using Loader = torch::data::StatelessDataLoader<
      torch::data::datasets::MapDataset<Dataset, detail::FormatBatch<typename Dataset::BatchType>>, EpochShardSampler>;

  ShardableLoader(Dataset dataset, std::size_t batch_size, ShardOptions options = {})
      : dataset_(std::move(dataset)), batch_size_(batch_size), options_(options) {}

  /// Restricts the loader to `rank`'s shard of `world_size` (nano calls it), with the batch
  /// balancer and sampler hook of `from_world` where this loader's own options set none.
  /// Throws UsageError for a dataset without a size or a bad rank (from make_sharded_loader).
  void shard(int rank, int world_size, ShardOptions from_world = {}) {
    rank_ = rank;
    world_size_ = world_size;
    from_world_ = std::move(from_world);
    loader_.reset();
    build();
  }
  Loader& operator*() { return build(); }
  Loader* operator->() { return &build(); }
  auto begin() { return build().begin(); }
  auto end() { return build().end(); }
  std::size_t batch_size() const { return batch_size_; }
  /// The batch each rank of the world it is sharded for takes: batch_size(), or in an elastic
  /// world under --batch-policy global its share of the first world's global batch.
  std::size_t rank_batch_size() const {
    return per_rank_batch(batch_size_, batch_world_size(world_size_), world_size_);
  }
  const ShardOptions& options() const { return options_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  /// In a run resumed from a checkpoint (nano(..., checkpoint_dir)): how many batches of the
  /// pass in progress the interrupted run had trained; 0 otherwise. Ask after the pass's first
  /// batch, to show where the epoch stands.
  std::size_t resumed_batches() const { return *resumed_; }

 private:
  Loader& build() {
    if (!loader_) {
      ShardOptions options = options_;  // the caller's own balancer and hook, if any, win
      if (!options.balancer && options.workers == 0) options.balancer = from_world_.balancer;
      if (!options.hook) options.hook = from_world_.hook;
      options.hook = [inner = std::move(options.hook), resumed = resumed_](EpochShardSampler& sampler,
                                                                           SamplerEvent what) {
        if (inner) inner(sampler, what);  // may load the sampler (a resume)
        if (what == SamplerEvent::kBatch) *resumed = sampler.resumed_batches();
      };
      if (options.format.identity()) options.format = from_world_.format;
      loader_ = make_sharded_loader(dataset_, rank_, world_size_, rank_batch_size(), options);
    }
    return *loader_;
  }
  Dataset dataset_;
  std::size_t batch_size_;
  ShardOptions options_;
  ShardOptions from_world_;  // from the last shard(), for this world only
  int rank_ = 0;
  int world_size_ = 1;
  std::unique_ptr<Loader> loader_;
  std::shared_ptr<std::size_t> resumed_ = std::make_shared<std::size_t>(0);  // set by the sampler's hook
};

namespace detail {

/// libtorch's loss modules are modules too, but they are loss functions, not the model.
template <class M>
struct is_loss_impl : std::false_type {};
template <>
struct is_loss_impl<torch::nn::L1LossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::KLDivLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::MSELossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::BCELossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::HingeEmbeddingLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::MultiMarginLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::CosineEmbeddingLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::SmoothL1LossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::HuberLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::MultiLabelMarginLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::SoftMarginLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::MultiLabelSoftMarginLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::TripletMarginLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::TripletMarginWithDistanceLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::CTCLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::PoissonNLLLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::MarginRankingLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::NLLLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::CrossEntropyLossImpl> : std::true_type {};
template <>
struct is_loss_impl<torch::nn::BCEWithLogitsLossImpl> : std::true_type {};

template <class T>
struct is_shared_module : std::false_type {};
template <class M>
struct is_shared_module<std::shared_ptr<M>>
    : std::bool_constant<std::is_base_of_v<torch::nn::Module, M> && !is_loss_impl<M>::value> {};

template <class M>
std::bool_constant<!is_loss_impl<M>::value> holder_test(const torch::nn::ModuleHolder<M>*);
std::false_type holder_test(...);

/// A model: a ModuleHolder (torch::nn::Linear, TORCH_MODULE(Net)) or shared_ptr<Module>,
/// except libtorch's loss modules (torch::nn::MSELoss...), which are passed through.
template <class T>
constexpr bool is_model_v =
    decltype(holder_test(std::declval<std::decay_t<T>*>()))::value || is_shared_module<std::decay_t<T>>::value;

template <class T>
struct optimizer_pointee {
  using type = void;
};
template <class O>
struct optimizer_pointee<std::shared_ptr<O>> {
  using type = O;
};
template <class O, class D>
struct optimizer_pointee<std::unique_ptr<O, D>> {
  using type = O;
};

/// An optimizer: derived from torch::optim::Optimizer, held directly or by a smart pointer.
template <class T>
constexpr bool is_optimizer_v =
    std::is_base_of_v<torch::optim::Optimizer, std::decay_t<T>> ||
    std::is_base_of_v<torch::optim::Optimizer, typename optimizer_pointee<std::decay_t<T>>::type>;

template <class T>
struct is_shardable_loader : std::false_type {};
template <class D>
struct is_shardable_loader<ShardableLoader<D>> : std::true_type {};
template <class T>
constexpr bool is_shardable_loader_v = is_shardable_loader<std::decay_t<T>>::value;

template <class T>
struct is_torch_loader_object : std::false_type {};
template <class D, class S>
struct is_torch_loader_object<torch::data::StatelessDataLoader<D, S>> : std::true_type {};
template <class D>
struct is_torch_loader_object<torch::data::StatefulDataLoader<D>> : std::true_type {};
template <class T>
struct is_torch_loader : is_torch_loader_object<T> {};
template <class T, class Del>
struct is_torch_loader<std::unique_ptr<T, Del>> : is_torch_loader_object<T> {};
template <class T>
struct is_torch_loader<std::shared_ptr<T>> : is_torch_loader_object<T> {};
/// A libtorch DataLoader (or a smart pointer to one): cannot be sharded.
template <class T>
constexpr bool is_torch_loader_v = is_torch_loader<std::decay_t<T>>::value;

template <class T>
std::shared_ptr<torch::nn::Module> module_of(T& model) {
  if constexpr (is_shared_module<std::decay_t<T>>::value) {
    return model;
  } else {
    return model.ptr();
  }
}

template <class T>
torch::optim::Optimizer* optimizer_of(T& optimizer) {
  if constexpr (std::is_base_of_v<torch::optim::Optimizer, std::decay_t<T>>) {
    return &optimizer;
  } else {
    return optimizer.get();
  }
}

}  // namespace detail

/// The wrapped training function; call it with the function's own arguments.
template <class F>
class NanoFunction {
 public:
  NanoFunction(TorchNanoOptions options, F function) : options_(std::move(options)), function_(std::move(function)) {}

  template <class... Args>
  auto operator()(Args&&... args) {
    constexpr int models = (0 + ... + (detail::is_model_v<Args> ? 1 : 0));
    static_assert(models >= 1,
                  "nano::nano: the training function's arguments must include exactly one model "
                  "(a torch::nn::ModuleHolder such as torch::nn::Linear, or a "
                  "std::shared_ptr<torch::nn::Module>); found none");
    static_assert(models <= 1,
                  "nano::nano: the training function's arguments must include exactly one model; "
                  "found more than one");
    static_assert(!(false || ... || detail::is_torch_loader_v<Args>),
                  "nano::nano: a libtorch DataLoader cannot be sharded (its dataset and sampler "
                  "are private); pass a nano::ShardableLoader(dataset, batch_size) instead");
    using R = std::invoke_result_t<F&, Args&&...>;
    static_assert(detail::is_result_type_v<R>,
                  "nano::nano: the training function must return void, a number, std::string "
                  "or at::Tensor");

    in_program::Session session(options_);
    std::shared_ptr<torch::nn::Module> model;
    std::vector<torch::optim::Optimizer*> optimizers;
    auto collect = [&](auto& arg) {
      using A = decltype(arg);
      if constexpr (detail::is_model_v<A>) model = detail::module_of(arg);
      if constexpr (detail::is_optimizer_v<A>) optimizers.push_back(detail::optimizer_of(arg));
    };
    (collect(args), ...);

    if (session.role() == in_program::Role::kCaller) {
      session.launch();
      session.load_trained(*model, optimizers);
      if constexpr (std::is_void_v<R>) {
        return;
      } else {
        return detail::from_result<R>(session.result());
      }
    }

    World& world = session.world();
    auto shard = [&](auto& arg) {
      if constexpr (detail::is_shardable_loader_v<decltype(arg)>) {
        ShardOptions mine = arg.options();
        mine.balancer = nullptr;  // the loader keeps its own; these are the world's
        mine.hook = nullptr;
        const std::size_t batch = per_rank_batch(arg.batch_size(), batch_world_size(world.size()), world.size());
        arg.shard(world.rank(), world.size(), session.loader_options(mine, batch));
      }
    };
    (shard(args), ...);
    session.attach(model, optimizers);

    if (session.role() == in_program::Role::kLaunchedRank) {
      try {
        if constexpr (std::is_void_v<R>) {
          std::invoke(function_, std::forward<Args>(args)...);
        } else {
          session.set_result(detail::to_result(std::invoke(function_, std::forward<Args>(args)...)));
        }
      } catch (const std::exception& e) {
        // The rank's end is its report: the launcher names this rank and shows this line.
        std::fprintf(stderr, "nano: rank %d: training function failed: %s\n", world.rank(), e.what());
        in_program::end_launched_rank(1);
      }
      in_program::end_launched_rank(session.finish_launched_rank(/*optimizers_alive=*/true));
    }
    return std::invoke(function_, std::forward<Args>(args)...);
  }

 private:
  TorchNanoOptions options_;
  F function_;
};

/// The decorator object nano::nano(options) returns; apply it to a training function.
class Nano {
 public:
  explicit Nano(TorchNanoOptions options) : options_(std::move(options)) {}
  template <class F>
  NanoFunction<std::decay_t<F>> operator()(F&& function) const {
    return NanoFunction<std::decay_t<F>>(options_, std::forward<F>(function));
  }
  const TorchNanoOptions& options() const { return options_; }

 private:
  TorchNanoOptions options_;
};

/// `nano::nano({.num_processes = 2})(train)(model, optimizer, loader, epochs, loss)`.
inline Nano nano(TorchNanoOptions options = {}) { return Nano(std::move(options)); }

}  // namespace nano
