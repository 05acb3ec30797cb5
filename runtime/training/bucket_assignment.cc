#include "runtime/training/bucket_assignment.h"

namespace nano {

std::vector<std::vector<std::size_t>> assign_buckets(const std::vector<GradientSpec>& gradients,
                                                     std::size_t cap_bytes) {
  std::vector<std::vector<std::size_t>> buckets;
  std::size_t used = 0;  // bytes in the last bucket
  for (std::size_t j = gradients.size(); j-- > 0;) {
    const GradientSpec& g = gradients[j];
    const bool start_new =
        buckets.empty() || gradients[buckets.back().front()].dtype != g.dtype || used + g.bytes > cap_bytes;
    if (start_new) {
      buckets.emplace_back();
      used = 0;
    }
    buckets.back().push_back(j);
    used += g.bytes;
  }
  return buckets;
}

}  // namespace nano
