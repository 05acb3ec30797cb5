#pragma once
// A sum whose wire carries the tensor's own 16-bit floats. Debian's Gloo cannot add bfloat16,
// and widening to float32 first doubles the bytes between hosts, where most of an exchange's
// time goes: this ring sends bfloat16 (or float16) through the group's send and recv, and adds
// in float32.
#include <torch/csrc/api/include/torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif

#include <ATen/core/Tensor.h>

#include <functional>

namespace nano {

class SerialExecutor;

/// What a c10d group of one device is: torch 2.x's c10d::Backend (ProcessGroupGloo's base, and
/// what a registered backend's creator returns); torch 1.13's c10d::ProcessGroup. The collective
/// methods have the same signatures in both.
#if TORCH_VERSION_MAJOR >= 2
using C10dGroup = c10d::Backend;
#else
using C10dGroup = c10d::ProcessGroup;
#endif

/// Waits for one send or recv of the group, bounded by its timeout; throws nano::Error naming
/// `what` when it fails.
using WaitForWork = std::function<void(const c10::intrusive_ptr<c10d::Work>& work, const char* what)>;

/// In place: `tensor` (contiguous CPU bfloat16 or float16) = its sum over every rank of `group`,
/// the same bits on every rank. A ring: n-1 steps of a reduce-scatter, in which each rank adds
/// its next neighbour's partial sums of one segment into its own float32 copy (the partial sums
/// travel in the tensor's dtype, rounded once per hop), then n-1 steps of an all-gather of the
/// finished segments. Each rank sends 2(n-1)/n of the tensor's bytes. Every rank of `group`
/// must call it with the same element count, one call at a time.
void ring_sum_16bit(C10dGroup& group, at::Tensor& tensor, const WaitForWork& wait);

/// Starts `tensor` (contiguous CPU) summed in place over `group` and returns what waits for the
/// sum, each of Gloo's steps waited through `wait`. With `ring` (a 16-bit float the caller wants
/// carried as 16 bits) the sum is ring_sum_16bit, run on `ring_thread` when one is given (so that
/// the caller's next step overlaps it), else before this returns; otherwise Gloo's own
/// all-reduce. What the C++ Gloo communicator and the nano torch backend both send between hosts.
std::function<void()> start_gloo_sum(C10dGroup& group, at::Tensor tensor, bool ring, SerialExecutor* ring_thread,
                                     WaitForWork wait);

}  // namespace nano
