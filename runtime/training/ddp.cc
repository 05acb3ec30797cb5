#include <nano/ddp.h>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <chrono>
#include <cmath>
#include <string>
#include <utility>

#include <nano/error.h>

#include "runtime/timeline/recorder.h"
#include "runtime/timeline/step_report.h"
#include "runtime/training/bucket_assignment.h"

namespace nano {

namespace {

// Rank 0's tensors packed into groups of at most this many bytes per broadcast: few messages
// for many small tensors, without a second copy of a large model while it is broadcast.
constexpr int64_t kBroadcastGroupBytes = 4 << 20;

void broadcast_group(Communicator& comm, const std::vector<at::Tensor>& tensors, int root) {
  if (tensors.size() == 1 && tensors.front().is_contiguous()) {
    comm.broadcast(const_cast<at::Tensor&>(tensors.front()), root);
    return;
  }
  int64_t total = 0;
  for (const auto& t : tensors) total += static_cast<int64_t>(t.nbytes());
  at::Tensor packed = at::empty({total}, at::TensorOptions().dtype(at::kByte));
  auto* base = packed.data_ptr<uint8_t>();
  int64_t offset = 0;
  auto byte_view = [&](const at::Tensor& t) {
    // A view of `packed` with t's dtype and shape.
    return at::from_blob(base + offset, t.sizes(), t.options().dtype(t.scalar_type()));
  };
  if (comm.rank() == root) {
    for (const auto& t : tensors) {
      byte_view(t).copy_(t);
      offset += static_cast<int64_t>(t.nbytes());
    }
  }
  comm.broadcast(packed, root);
  if (comm.rank() != root) {
    offset = 0;
    for (const auto& t : tensors) {
      const_cast<at::Tensor&>(t).copy_(byte_view(t));
      offset += static_cast<int64_t>(t.nbytes());
    }
  }
}

}  // namespace

void broadcast_coalesced(Communicator& comm, const std::vector<at::Tensor>& tensors, int root) {
  if (comm.size() == 1 || tensors.empty()) return;
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> group;
  int64_t group_bytes = 0;
  for (const auto& t : tensors) {
    const auto bytes = static_cast<int64_t>(t.nbytes());
    if (!group.empty() && group_bytes + bytes > kBroadcastGroupBytes) {
      broadcast_group(comm, group, root);
      group.clear();
      group_bytes = 0;
    }
    group.push_back(t);
    group_bytes += bytes;
  }
  broadcast_group(comm, group, root);
}

namespace detail {

struct Bucket {
  std::vector<std::size_t> params;  // indexes into Reducer::params
  std::vector<int64_t> offsets;
  at::Tensor flat;
  at::Tensor wire;  // the bfloat16 copy all-reduced instead of `flat` (bf16_gradient_exchange)
  std::size_t pending = 0;
  std::unique_ptr<Work> work;
};

struct Reducer : std::enable_shared_from_this<Reducer> {
  std::shared_ptr<Communicator> comm;
  std::vector<at::Tensor> params;         // parameters that require grad
  std::vector<std::size_t> module_index;  // position in module->parameters()
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  std::vector<Bucket> buckets;
  std::vector<std::size_t> bucket_of;
  std::vector<char> ready;
  std::size_t next_to_launch = 0;
  bool callback_queued = false;
  bool sync = true;
  double weight = 1.0;      // this rank's gradients are scaled by it before averaging
  double wait_seconds = 0;  // total time finish() spent waiting for the all-reduces

  void reset_iteration() {
    std::fill(ready.begin(), ready.end(), 0);
    for (auto& b : buckets) {
      b.pending = b.params.size();
      b.work.reset();
    }
    next_to_launch = 0;
    callback_queued = false;
  }

  // The part of `bucket` that holds parameter k's gradient, as a tensor of its own (not an
  // autograd view: Optimizer::zero_grad() calls detach_(), which views refuse), laid out as
  // the parameter is (a channels-last weight gets a channels-last gradient, as autograd's own
  // would be), else contiguous.
  static at::Tensor alias(const Bucket& bucket, std::size_t k, const at::Tensor& p) {
    at::Tensor a = at::empty({0}, bucket.flat.options());
    const int64_t offset = bucket.flat.storage_offset() + bucket.offsets[k];
    if (p.is_non_overlapping_and_dense()) return a.set_(bucket.flat.storage(), offset, p.sizes(), p.strides());
    return a.set_(bucket.flat.storage(), offset, p.sizes());
  }

  static bool is_alias(const Bucket& bucket, std::size_t k, const at::Tensor& grad) {
    return grad.defined() && grad.data_ptr() == static_cast<char*>(bucket.flat.data_ptr()) +
                                                    bucket.offsets[k] * bucket.flat.element_size();
  }

  void launch(Bucket& bucket) {
    at::NoGradGuard no_grad;
    for (std::size_t k = 0; k < bucket.params.size(); ++k) {
      const at::Tensor& p = params[bucket.params[k]];
      const at::Tensor& grad = p.grad();
      // After the first step a gradient lives in its bucket already (autograd accumulates into
      // the alias finish() installed); only a fresh one (e.g. after zero_grad(true)) is copied.
      if (is_alias(bucket, k, grad)) continue;
      at::Tensor slice = alias(bucket, k, p);
      if (grad.defined()) {
        slice.copy_(grad);
      } else {
        slice.zero_();
      }
    }
    if (weight != 1.0) bucket.flat.mul_(weight);
    if (bucket.wire.defined()) {
      bucket.wire.copy_(bucket.flat);
      bucket.work = comm->all_reduce_async(bucket.wire, ReduceOp::kAverage);
    } else {
      bucket.work = comm->all_reduce_async(bucket.flat, ReduceOp::kAverage);
    }
  }

  void launch_ready_in_order() {
    while (next_to_launch < buckets.size() && buckets[next_to_launch].pending == 0) {
      launch(buckets[next_to_launch++]);
    }
  }

  void on_grad_ready(std::size_t i) {
    if (!sync) return;
    if (!callback_queued) {
      std::weak_ptr<Reducer> weak = shared_from_this();
      torch::autograd::Engine::get_default_engine().queue_callback([weak] {
        if (auto self = weak.lock()) self->finish();
      });
      callback_queued = true;
    }
    if (ready[i]) return;
    ready[i] = 1;
    if (--buckets[bucket_of[i]].pending == 0) launch_ready_in_order();
  }

  // Runs at the end of backward: every rank launches the remaining buckets in the same order.
  void finish() {
    try {
      while (next_to_launch < buckets.size()) launch(buckets[next_to_launch++]);
      at::NoGradGuard no_grad;
      timeline::exchange_begin();
      for (auto& bucket : buckets) {
        const auto waiting = std::chrono::steady_clock::now();
        bucket.work->wait();
        wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - waiting).count();
        if (bucket.wire.defined()) bucket.flat.copy_(bucket.wire);
        // The gradients become aliases of the averaged bucket: no copy back, and the separate
        // gradient tensors autograd made are freed, so DDP costs one set of gradients in all.
        for (std::size_t k = 0; k < bucket.params.size(); ++k) {
          at::Tensor& p = params[bucket.params[k]];
          if (!is_alias(bucket, k, p.grad())) p.mutable_grad() = alias(bucket, k, p);
        }
      }
    } catch (...) {
      reset_iteration();
      throw;
    }
    reset_iteration();
    step_report::ddp_step();
    timeline::step_end();
  }
};

}  // namespace detail

namespace detail {
void count_forward_samples(long long samples) {
  step_report::forward_samples(samples);
  timeline::forward_begin();
}
}  // namespace detail

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<torch::nn::Module> module,
                                                 std::shared_ptr<Communicator> comm, DdpOptions options)
    : module_(std::move(module)), comm_(std::move(comm)), options_(options) {
  if (!module_) throw Error("nano: DistributedDataParallel: null module");
  if (!comm_) throw Error("nano: DistributedDataParallel: null communicator");
  if (options_.bucket_cap_bytes == 0) {
    throw UsageError("nano: DistributedDataParallel: bad bucket_cap_bytes=0: expected > 0");
  }
  auto all_params = module_->parameters(/*recurse=*/true);
  auto buffers = module_->buffers(/*recurse=*/true);

  std::vector<at::Tensor> state;
  for (auto& p : all_params) state.push_back(p);
  for (auto& b : buffers) state.push_back(b);
  broadcast_coalesced(*comm_, state, 0);

  reducer_ = std::make_shared<detail::Reducer>();
  auto& r = *reducer_;
  r.comm = comm_;
  if (comm_->size() == 1) return;  // nothing to average

  for (std::size_t i = 0; i < all_params.size(); ++i) {
    if (!all_params[i].requires_grad()) continue;
    // Only the dtype matters: gradients travel in the flat buckets, whatever the layout.
    check_reducible(at::empty({0}, all_params[i].options()), "DistributedDataParallel parameter");
    r.params.push_back(all_params[i]);
    r.module_index.push_back(i);
  }
  std::vector<GradientSpec> specs;
  for (const at::Tensor& p : r.params) {
    specs.push_back({static_cast<std::size_t>(p.numel()) * p.element_size(), static_cast<int>(p.scalar_type())});
  }
  r.bucket_of.assign(r.params.size(), 0);
  for (auto& members : assign_buckets(specs, options_.bucket_cap_bytes)) {
    r.buckets.emplace_back();
    r.buckets.back().params = std::move(members);
    for (std::size_t j : r.buckets.back().params) r.bucket_of[j] = r.buckets.size() - 1;
  }
  for (auto& bucket : r.buckets) {
    int64_t total = 0;
    for (auto k : bucket.params) {
      bucket.offsets.push_back(total);
      total += r.params[k].numel();
    }
    bucket.flat = at::zeros({total}, r.params[bucket.params.front()].options().requires_grad(false));
    // Buckets hold one dtype each; only the wide floating ones are worth narrowing.
    const auto type = bucket.flat.scalar_type();
    if (options_.bf16_gradient_exchange && (type == at::kFloat || type == at::kDouble))
      bucket.wire = at::zeros({total}, bucket.flat.options().dtype(at::kBFloat16));
  }
  r.ready.assign(r.params.size(), 0);
  r.reset_iteration();

  std::weak_ptr<detail::Reducer> weak = reducer_;
  for (std::size_t j = 0; j < r.params.size(); ++j) {
    auto acc = torch::autograd::impl::grad_accumulator(r.params[j]);
    acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [weak, j](const torch::autograd::variable_list& outputs, const torch::autograd::variable_list&) {
          if (auto self = weak.lock()) self->on_grad_ready(j);
          return outputs;
        }));
    r.accumulators.push_back(std::move(acc));
  }
}

DistributedDataParallel::~DistributedDataParallel() = default;

void DistributedDataParallel::sync_buffers() {
  if (comm_->size() == 1) return;
  auto buffers = module_->buffers(/*recurse=*/true);
  std::vector<at::Tensor> tensors(buffers.begin(), buffers.end());
  broadcast_coalesced(*comm_, tensors, 0);
}

DistributedDataParallel::NoSync::NoSync(detail::Reducer* reducer) : reducer_(reducer), previous_(reducer->sync) {
  reducer_->sync = false;
}

DistributedDataParallel::NoSync::NoSync(NoSync&& other) noexcept
    : reducer_(other.reducer_), previous_(other.previous_) {
  other.reducer_ = nullptr;
}

DistributedDataParallel::NoSync::~NoSync() {
  if (reducer_) reducer_->sync = previous_;
}

DistributedDataParallel::NoSync DistributedDataParallel::no_sync() { return NoSync(reducer_.get()); }

void DistributedDataParallel::set_gradient_weight(double weight) {
  if (!std::isfinite(weight) || weight <= 0) {
    throw UsageError("nano: DistributedDataParallel: bad gradient weight " + std::to_string(weight) +
                     ": expected a finite number > 0");
  }
  reducer_->weight = weight;
}

double DistributedDataParallel::gradient_weight() const { return reducer_->weight; }

double DistributedDataParallel::sync_wait_seconds() const { return reducer_->wait_seconds; }

std::vector<std::vector<std::size_t>> DistributedDataParallel::bucket_layout() const {
  std::vector<std::vector<std::size_t>> layout;
  for (const auto& bucket : reducer_->buckets) {
    layout.emplace_back();
    for (auto k : bucket.params) layout.back().push_back(reducer_->module_index[k]);
  }
  return layout;
}

}  // namespace nano
