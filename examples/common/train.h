#pragma once
// The examples' training loop pieces, written once for every way of launching them: the
// optimizer step is a callback, so a runtime can put gradient averaging and auto_lr in it.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "examples/common/progress.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace nano::examples {

/// What one epoch did.
struct EpochResult {
  int64_t resumed_batches = 0;  ///< done before a resume (not in the fields below)
  int64_t batches = 0;
  int64_t images = 0;
  double seconds = 0;
  double mean_loss = 0;
};

/// Does the backward pass and optimizer step for one batch's loss, e.g.
/// `[&](const at::Tensor& loss) { opt.zero_grad(); loss.backward(); opt.step(); }`.
using StepFn = std::function<void(const at::Tensor& loss)>;

/// Batches in one epoch: ceil(examples / batch_size), capped at `max_steps` when it is > 0.
int64_t batches_per_epoch(int64_t examples, int64_t batch_size, int64_t max_steps);

/// Samples all ranks train together in step `step` (0-based) of an epoch over `examples`:
/// world_size x batch_size, except the last step, which takes what is left of the epoch
/// padded to ceil(examples / world_size) per rank (how nano's sharded loaders count). Per-rank
/// batches may differ when nano balances them; their sum is this.
int64_t global_step_samples(int64_t examples, int64_t batch_size, int world_size, int64_t step);

/// A contiguous range of rows.
struct RowRange {
  int64_t begin = 0;
  int64_t length = 0;
};

/// The rows rank `rank` of `world_size` evaluates among the first `limit` (0 = all) of
/// `examples`: contiguous, every row exactly once, lengths differing by at most one.
RowRange evaluation_shard(int64_t examples, int64_t limit, int rank, int world_size);

/// How many rows of `logits` [N, C] have their arg-max equal to `targets` [N].
int64_t count_correct(const at::Tensor& logits, const at::Tensor& targets);

/// FNV-1a-64 of the bytes of every parameter and buffer of `module`, in order, as 16 hex digits:
/// equal for bit-identical weights.
std::string weights_fingerprint(const torch::nn::Module& module);

/// Mean cross-entropy of `logits` [N, C] against class indices `targets` [N].
at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& targets);

/// Trains `model` (a torch module holder or pointer: `model->forward(x)`, `model->train()`)
/// for one pass over `loader` (a torch DataLoader yielding stacked Example<> batches),
/// stopping after `max_steps` batches when it is > 0. Calls `step(loss)` for each batch and
/// reports to `progress` (which it finishes).
template <typename Model, typename Loader>
EpochResult train_one_epoch(Model& model, Loader& loader, const StepFn& step, ProgressPrinter& progress,
                            int64_t max_steps = 0) {
  const auto start = std::chrono::steady_clock::now();
  EpochResult r;
  double loss_sum = 0;
  model->train();
  for (auto& batch : loader) {
    if (max_steps > 0 && r.batches >= max_steps) break;
    const at::Tensor loss = classification_loss(model->forward(batch.data), batch.target);
    step(loss);
    const double l = loss.template item<double>();
    const int64_t n = batch.data.size(0);
    ++r.batches;
    r.images += n;
    loss_sum += l;
    progress.update(1, n, l);
  }
  progress.finish();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.mean_loss = r.batches > 0 ? loss_sum / static_cast<double>(r.batches) : 0;
  return r;
}

/// How many of `images` [N, ...] have a predicted class equal to `labels` [N], evaluated in
/// eval mode without gradients, `batch_size` rows at a time, in the model's floating dtype (a
/// --precision 64 model takes float64 images). Leaves the model in eval mode.
template <typename Model>
int64_t correct_predictions(Model& model, const at::Tensor& images_in, const at::Tensor& labels,
                            int64_t batch_size = 250) {
  at::NoGradGuard no_grad;
  model->eval();
  const auto params = model->parameters();
  const at::Tensor images =
      params.empty() || !images_in.is_floating_point() ? images_in : images_in.to(params.front().scalar_type());
  const int64_t n = images.size(0);
  int64_t correct = 0;
  for (int64_t begin = 0; begin < n; begin += batch_size) {
    const int64_t len = std::min(batch_size, n - begin);
    correct += count_correct(model->forward(images.narrow(0, begin, len)), labels.narrow(0, begin, len));
  }
  return correct;
}

/// Fraction of `images` [N, ...] whose predicted class equals `labels` [N] (as
/// correct_predictions). Leaves the model in eval mode.
template <typename Model>
double evaluate(Model& model, const at::Tensor& images, const at::Tensor& labels, int64_t batch_size = 250) {
  const int64_t n = images.size(0);
  const int64_t correct = correct_predictions(model, images, labels, batch_size);
  return n > 0 ? static_cast<double>(correct) / static_cast<double>(n) : 0.0;
}

/// The same over a dataset that exposes all its examples as `images()` and `labels()`
/// (FashionMnist).
template <typename Model, typename Dataset>
double evaluate(Model& model, const Dataset& dataset, int64_t batch_size = 250) {
  return evaluate(model, dataset.images(), dataset.labels(), batch_size);
}

}  // namespace nano::examples
