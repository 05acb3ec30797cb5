#include "examples/common/train.h"

namespace nano::examples {

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
