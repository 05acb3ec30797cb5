#pragma once
// A sum whose wire carries the tensor's own 16-bit floats. Debian's Gloo cannot add bfloat16,
// and widening to float32 first doubles the bytes between hosts, where most of an exchange's
// time goes: this ring sends bfloat16 (or float16) through the group's send and recv, and adds
// in float32.
#include <ATen/core/Tensor.h>

#include <functional>

#include "python/torch_backend.h"

namespace nano {

/// Waits for one send or recv of the group, bounded by its timeout; throws nano::Error naming
/// `what` when it fails.
using WaitForWork = std::function<void(const c10::intrusive_ptr<c10d::Work>& work, const char* what)>;

/// In place: `tensor` (contiguous CPU bfloat16 or float16) = its sum over every rank of `group`,
/// the same bits on every rank. A ring: n-1 steps of a reduce-scatter, in which each rank adds
/// its next neighbour's partial sums of one segment into its own float32 copy (the partial sums
/// travel in the tensor's dtype, rounded once per hop), then n-1 steps of an all-gather of the
/// finished segments. Each rank sends 2(n-1)/n of the tensor's bytes. Every rank of `group`
/// must call it with the same element count, one call at a time.
void ring_sum_16bit(TorchBackendBase& group, at::Tensor& tensor, const WaitForWork& wait);

}  // namespace nano
