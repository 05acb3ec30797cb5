#pragma once
// Data-parallel training for any libtorch module: replicas start identical (broadcast from
// rank 0), gradients are averaged in buckets whose all-reduce starts during backward.
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <ATen/core/grad_mode.h>

#include <cstddef>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include <nano/communicator.h>

namespace nano {

struct DdpOptions {
  /// Bytes of gradients per bucket (PyTorch's default 25 MB); small values force many buckets.
  std::size_t bucket_cap_bytes = 25u * 1024u * 1024u;
  /// Broadcast buffers (e.g. BatchNorm statistics) from rank 0 before each forward().
  bool broadcast_buffers = true;
  /// All-reduce float32 and float64 gradients as bfloat16 (PyTorch's bf16_compress_hook): half
  /// the bytes per step on shared memory and MPI, summed in float and rounded to bfloat16, then
  /// widened back. Gloo's TCP path (several hosts) has no bfloat16 sum, so it sends float32.
  /// Off by default: it costs two conversions per step and bfloat16's 8-bit mantissa.
  bool bf16_gradient_exchange = false;
};

namespace detail {
struct Reducer;
/// Counts the samples of a forward for `nano-run --tune` (runtime/timeline/step_report.h).
void count_forward_samples(long long samples);
/// The batch size of a forward whose first argument is a tensor, while gradients are recorded
/// (an evaluation forward is no training sample).
template <class First, class... Rest>
void note_batch(const First& first, const Rest&...) {
  if constexpr (std::is_convertible_v<const First&, const at::Tensor&>) {
    const at::Tensor& t = first;
    if (t.defined() && t.dim() > 0 && at::GradMode::is_enabled()) count_forward_samples(t.size(0));
  }
}
inline void note_batch() {}
}  // namespace detail

/// Wraps a module (shared_ptr<Module> or ModuleHolder) for data-parallel training.
/// Construction broadcasts parameters and buffers from rank 0 (collective: every rank
/// constructs its DDP at the same point). During backward(), each parameter's gradient
/// accumulator hook marks it ready; buckets (reverse parameter order) are all-reduced
/// asynchronously, strictly in bucket order, as soon as all their gradients are ready; the
/// engine's final callback launches the rest (missing gradients count as zeros, so unused
/// parameters neither hang nor skew the average) and waits, so the optimizer sees the averaged
/// gradients when backward() returns. From then on each parameter's grad() shares memory with
/// its bucket (PyTorch's gradient_as_bucket_view), so DDP adds no second set of gradients;
/// zero_grad() in any form keeps working, and a gradient you replace is copied in. Parameters
/// without a local gradient receive the average too.
class DistributedDataParallel {
 public:
  DistributedDataParallel(std::shared_ptr<torch::nn::Module> module, std::shared_ptr<Communicator> comm,
                          DdpOptions options = {});
  template <class M>
  DistributedDataParallel(const torch::nn::ModuleHolder<M>& module, std::shared_ptr<Communicator> comm,
                          DdpOptions options = {})
      : DistributedDataParallel(std::shared_ptr<torch::nn::Module>(module.ptr()), std::move(comm), options) {}
  ~DistributedDataParallel();
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  /// Copies rank 0's buffers to every rank (collective). forward() calls it when
  /// options.broadcast_buffers is on; call it yourself before a forward you run directly.
  void sync_buffers();

  /// RAII guard: while alive, backward() accumulates gradients locally without all-reduce
  /// (gradient accumulation); the first backward after it ends syncs the accumulated sum.
  class NoSync {
   public:
    explicit NoSync(detail::Reducer* reducer);
    NoSync(NoSync&& other) noexcept;
    ~NoSync();

   private:
    detail::Reducer* reducer_;
    bool previous_;
  };
  NoSync no_sync();

  /// Multiplies this rank's gradients by `weight` (finite, > 0; default 1) before they are
  /// averaged, from the next synchronising backward on (under no_sync, the accumulated sum is
  /// weighted when it is synced). With uneven per-rank batches, weight = ranks x local samples /
  /// global samples makes the average the mean gradient of the whole global batch; nano's
  /// BatchBalancer sets it. Throws UsageError naming a bad weight.
  void set_gradient_weight(double weight);
  double gradient_weight() const;

  /// Seconds this rank has spent, in all, blocked at the end of backward() waiting for the
  /// gradient all-reduces: the time it waited for slower ranks plus the exchange itself.
  double sync_wait_seconds() const;

  /// Parameter indexes (in module->parameters() order) of each bucket, in launch order.
  std::vector<std::vector<std::size_t>> bucket_layout() const;
  const std::shared_ptr<torch::nn::Module>& module_ptr() const { return module_; }
  Communicator& comm() const { return *comm_; }
  const std::shared_ptr<Communicator>& comm_ptr() const { return comm_; }
  const DdpOptions& options() const { return options_; }

 private:
  std::shared_ptr<torch::nn::Module> module_;
  std::shared_ptr<Communicator> comm_;
  DdpOptions options_;
  std::shared_ptr<detail::Reducer> reducer_;
};

/// Typed convenience over a ModuleHolder (e.g. torch::nn::Linear or a TORCH_MODULE):
/// `nano::DDP model(Net(), world.comm); auto y = model(x);` forward() syncs buffers first.
template <class Holder>
class DDP : public DistributedDataParallel {
 public:
  DDP(Holder module, std::shared_ptr<Communicator> comm, DdpOptions options = {})
      : DistributedDataParallel(module, std::move(comm), options), holder_(std::move(module)) {}

  template <class... Args>
  auto forward(Args&&... args) {
    if (options().broadcast_buffers) sync_buffers();
    detail::note_batch(args...);
    return holder_->forward(std::forward<Args>(args)...);
  }
  template <class... Args>
  auto operator()(Args&&... args) {
    return forward(std::forward<Args>(args)...);
  }
  Holder& module() { return holder_; }
  auto* operator->() { return holder_.get(); }

 private:
  Holder holder_;
};

/// Broadcasts `tensors` (any dtypes, contiguous or not) from `root` as one packed message.
void broadcast_coalesced(Communicator& comm, const std::vector<at::Tensor>& tensors, int root = 0);

}  // namespace nano
