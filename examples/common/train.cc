#include "examples/common/train.h"

#include <torch/nn/module.h>

#include <cstdio>

namespace nano::examples {

std::string weights_fingerprint(const torch::nn::Module& module) {
  uint64_t h = 1469598103934665603ULL;
  const auto add = [&h](const at::Tensor& t) {
    const at::Tensor c = t.detach().contiguous();
    const auto* p = static_cast<const unsigned char*>(c.data_ptr());
    for (size_t i = 0; i < c.nbytes(); ++i) {
      h ^= p[i];
      h *= 1099511628211ULL;
    }
  };
  for (const auto& p : module.parameters()) add(p);
  for (const auto& b : module.buffers()) add(b);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

int64_t batches_per_epoch(int64_t examples, int64_t batch_size, int64_t max_steps) {
  const int64_t full = batch_size > 0 ? (examples + batch_size - 1) / batch_size : 0;
  return max_steps > 0 ? std::min(full, max_steps) : full;
}

int64_t global_step_samples(int64_t examples, int64_t batch_size, int world_size, int64_t step) {
  const int64_t padded = (examples + world_size - 1) / world_size * world_size;
  const int64_t global = batch_size * world_size;
  return std::max<int64_t>(0, std::min(global, padded - step * global));
}

RowRange evaluation_shard(int64_t examples, int64_t limit, int rank, int world_size) {
  const int64_t n = limit > 0 ? std::min(limit, examples) : examples;
  const int64_t begin = n * rank / world_size;
  return {begin, n * (rank + 1) / world_size - begin};
}

int64_t count_correct(const at::Tensor& logits, const at::Tensor& targets) {
  return logits.argmax(1).eq(targets).sum().item<int64_t>();
}

at::Tensor classification_loss(const at::Tensor& logits, const at::Tensor& targets) {
  return at::cross_entropy_loss(logits, targets);
}

}  // namespace nano::examples
