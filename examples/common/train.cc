#include "examples/common/train.h"

namespace nano::examples {

int64_t batches_per_epoch(int64_t examples, int64_t batch_size, int64_t max_steps) {
  const int64_t full = batch_size > 0 ? (examples + batch_size - 1) / batch_size : 0;
  return max_steps > 0 ? std::min(full, max_steps) : full;
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
