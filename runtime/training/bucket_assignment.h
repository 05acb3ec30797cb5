#pragma once
// Which gradients DistributedDataParallel all-reduces together: a pure decision, apart from the
// reducer that carries it out (as c10d's compute_bucket_assignment_by_size is apart from its
// Reducer), so the rule is tested on its own.
#include <cstddef>
#include <vector>

namespace nano {

/// One gradient as the assignment sees it.
struct GradientSpec {
  std::size_t bytes = 0;  ///< numel x element size
  int dtype = 0;          ///< any id that is equal for equal element types
};

/// Buckets in launch order, each the indices (into `gradients`) of its members in the order they
/// are laid out. Gradients are taken in reverse (the last layers' are ready first during
/// backward); a new bucket starts when the element type changes or when the next gradient would
/// take the bucket past `cap_bytes`. A gradient larger than the cap gets a bucket of its own.
/// Every rank computes the same assignment from the same model, so no rank has to tell another.
std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<GradientSpec>& gradients, std::size_t cap_bytes);

}  // namespace nano
