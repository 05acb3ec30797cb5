#pragma once
// nano::TorchNano: subclass it, override train(), call `MyNano({.num_processes = 2}).train()`.
//
// How one call runs (the seed's semantics, with one C++ twist):
// * In a plain process (the caller), train() runs your body once, in *caller mode*: the first
//   nano helper it reaches (setup, setup_dataloader, backward, print0, set_result) re-executes
//   this program as num_processes ranks through nano's launcher (same planning, binding and
//   supervision as nano-run) and waits for them. Then setup(model, ...) copies rank 0's
//   trained parameters and buffers into your model, setup_dataloader() returns an empty
//   loader (the caller's loop runs zero steps), backward/print0/set_result do nothing; after
//   train() returns, result<T>() holds what rank 0 passed to set_result(). A failed rank
//   throws nano::RankFailedError (rank, exit code or signal, stderr tail) out of train().
//   So: do the per-step work in loops over nano's loaders, and call setup() before them.
// * Each rank runs main() again up to the same train() call (code before it runs on every
//   rank), runs your body with real helpers (DDP, auto_lr, sharded data), and the process
//   ends when the TorchNano object is destroyed (rank 0 first reports its model and result).
// * Under nano-run, mpirun or torchrun (rank variables set, no in-program marker), train()
//   joins that world and simply returns on every rank.
#include <cstddef>
#include <iostream>
#include <memory>
#include <sstream>
#include <utility>
#include <vector>

#include <torch/optim/optimizer.h>

#include <nano/batch_policy.h>
#include <nano/in_program.h>
#include <nano/sharding.h>

namespace nano {

class TorchNano {
 public:
  explicit TorchNano(TorchNanoOptions options = {});
  virtual ~TorchNano();
  TorchNano(const TorchNano&) = delete;
  TorchNano& operator=(const TorchNano&) = delete;

  /// Your training code; see the file comment for where it runs.
  virtual void train() = 0;

  /// This rank (0 in the caller), the world size (1 in the caller), rank 0 of a world
  /// (false in the caller: rank 0 is one of the launched processes).
  int rank();
  int world_size();
  bool is_main();
  /// True in a plain process that launches the ranks.
  bool is_caller() const { return session_->role() == in_program::Role::kCaller; }

  /// The value rank 0 passed to set_result() (caller, after train()); T: a number type,
  /// std::string or at::Tensor. Throws nano::Error when rank 0 set another kind or none.
  template <class T>
  T result() const {
    return detail::from_result<T>(session_->result());
  }
  const TrainResult& raw_result() const { return session_->result(); }
  const TorchNanoOptions& options() const { return session_->options(); }

 protected:
  /// Wraps `model` (a ModuleHolder or shared_ptr<Module>) for gradient averaging on the same
  /// module object (plain loss.backward() averages too) and applies auto_lr to `optimizers`.
  /// With options().checkpoint_dir, they are what checkpoints hold (with the loaders).
  /// Caller: launches (if not yet) and loads rank 0's trained weights into `model` and its
  /// optimizers' state into `optimizers` (as it was at the end of the last pass over a
  /// setup_dataloader() loader or at set_result(), when no step came after; else they stay
  /// as they were, and rank 0 warns).
  template <class Model, class... Optimizers>
  void setup(Model& model, Optimizers&... optimizers) {
    std::shared_ptr<torch::nn::Module> module = module_of(model);
    if (is_caller()) {
      session_->launch();
      session_->load_trained(*module, {&optimizer_of(optimizers)...});
      return;
    }
    session_->attach(std::move(module), std::vector<torch::optim::Optimizer*>{&optimizer_of(optimizers)...});
  }

  /// A DataLoader over this rank's disjoint shard of `dataset` (batch_size per rank,
  /// reshuffled every epoch; in an elastic world under --batch-policy global, the share of the
  /// first world's global batch, <nano/batch_policy.h>). With options().balance_batches (the default) and workers == 0,
  /// each step's N x batch_size samples are split by the ranks' measured speed, so a rank's
  /// batch may be a little larger or smaller than batch_size. With options().checkpoint_dir its
  /// position is checkpointed (workers must be 0). Caller: launches (if not yet) and returns an
  /// empty loader.
  template <class Dataset>
  auto setup_dataloader(Dataset dataset, std::size_t batch_size, ShardOptions options = {}) {
    if (is_caller()) {
      session_->launch();
      // The same type as a rank's loader (its batches formatted), but over nothing.
      return torch::data::make_data_loader(detail::formatted_dataset(std::move(dataset), options.format),
                                           EpochShardSampler(0, 0, 1, options.shuffle, options.allow_duplicates),
                                           torch::data::DataLoaderOptions(batch_size).workers(options.workers));
    }
    World& w = session_->world();
    // An elastic world that keeps the global batch gives each rank its share of the first one's.
    const std::size_t per_rank = per_rank_batch(batch_size, batch_world_size(w.size()), w.size());
    return make_sharded_loader(std::move(dataset), w, per_rank, session_->loader_options(std::move(options), per_rank));
  }

  /// With options().checkpoint_dir, in a run resumed from a checkpoint: how many batches of the
  /// pass in progress (of the loader that last handed out a batch) the interrupted run had
  /// trained; 0 otherwise. Ask after the pass's first batch, to show where the epoch stands.
  std::size_t resumed_batches() const { return session_->resumed_batches(); }

  /// loss.backward() on a rank (gradients arrive averaged); nothing in the caller.
  void backward(const at::Tensor& loss);

  /// Prints the parts and a newline on rank 0 only (nothing in the caller).
  template <class... Parts>
  void print0(const Parts&... parts) {
    if (is_caller()) {
      session_->launch();
      return;
    }
    if (!is_main()) return;
    std::ostringstream line;
    (line << ... << parts);
    std::cout << line.str() << std::endl;
  }

  /// Hands a value (number, std::string, at::Tensor) from rank 0 to the caller's result<T>().
  template <class T>
  void set_result(const T& value) {
    if (is_caller()) {
      session_->launch();
      return;
    }
    session_->set_result(detail::to_result(value));
  }

  /// The connected world; in the caller's pass, a world of one (identity collectives).
  World& world();

 private:
  template <class M>
  static std::shared_ptr<torch::nn::Module> module_of(torch::nn::ModuleHolder<M>& holder) {
    return holder.ptr();
  }
  template <class M>
  static std::shared_ptr<torch::nn::Module> module_of(std::shared_ptr<M>& ptr) {
    static_assert(std::is_base_of_v<torch::nn::Module, M>,
                  "nano::TorchNano::setup: the model must be a torch::nn::Module");
    return ptr;
  }
  template <class O>
  static torch::optim::Optimizer& optimizer_of(O& optimizer) {
    static_assert(std::is_base_of_v<torch::optim::Optimizer, O>,
                  "nano::TorchNano::setup: every argument after the model must be a "
                  "torch::optim::Optimizer");
    return optimizer;
  }

  std::unique_ptr<in_program::Session> session_;
  std::unique_ptr<World> caller_world_;
  int uncaught_at_construction_;
};

}  // namespace nano
