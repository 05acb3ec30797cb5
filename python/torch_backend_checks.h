#pragma once
// What every part of the nano torch backend (torch_backend*.cc) checks of torch's arguments
// before communicating, as torch's own backends do (a wrong argument is one rank's error, not the
// group's failure), and the byte views through which operations that only move bytes serve every
// dtype. Internal to python/.
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <ATen/ATen.h>

#include <vector>

#include <nano/error.h>
#include "runtime/collectives/collective_signature.h"
#include "runtime/collectives/shm_collectives.h"

namespace nano::torch_backend_detail {

using RedOp = c10d::ReduceOp::RedOpType;

// The shared-memory form of `op`, when it has one.
inline bool shm_op(RedOp op, ShmReduceOp* out) {
  switch (op) {
    case c10d::ReduceOp::SUM:
    case c10d::ReduceOp::AVG: *out = ShmReduceOp::kSum; return true;
    case c10d::ReduceOp::PRODUCT: *out = ShmReduceOp::kProduct; return true;
    case c10d::ReduceOp::MIN: *out = ShmReduceOp::kMin; return true;
    case c10d::ReduceOp::MAX: *out = ShmReduceOp::kMax; return true;
    default: return false;
  }
}

// An all_to_all's signature: its dtype only (each rank's counts may differ).
inline CollectiveSignature all_to_all_signature(const at::Tensor& input) {
  CollectiveSignature call = signature_of(CollectiveKind::kAllToAll, input);
  call.count = -1;
  return call;
}

// An all-reduce's signature: its op as torch names it (AVG: a sum over `size` ranks).
inline CollectiveSignature all_reduce_signature(const at::Tensor& tensor, RedOp op, int size) {
  CollectiveSignature call = signature_of(CollectiveKind::kAllReduce, tensor);
  if (!shm_op(op, &call.op)) {
    call.op = op == c10d::ReduceOp::BAND  ? ShmReduceOp::kBitAnd
              : op == c10d::ReduceOp::BOR ? ShmReduceOp::kBitOr
                                          : ShmReduceOp::kBitXor;
  }
  if (op == c10d::ReduceOp::AVG) call.average = static_cast<int16_t>(size);
  return call;
}

// A contiguous CPU tensor's bytes, as a uint8 tensor over the same memory: how operations that
// only move bytes serve every dtype, Gloo's missing bfloat16 and bool included. It keeps the
// tensor alive: for Gloo's send and recv, which outlive the call.
inline at::Tensor owned_bytes(const at::Tensor& tensor) {
  return at::from_blob(
      tensor.data_ptr(), {static_cast<int64_t>(tensor.nbytes())}, [keep = tensor](void*) {},
      at::TensorOptions().dtype(at::kByte));
}

// The same without keeping it alive, for what the backend's thread hands Gloo and waits for:
// Gloo's threads then never hold (and free, perhaps during the interpreter's exit) a tensor a
// Python caller owns.
inline at::Tensor borrowed_bytes(const at::Tensor& tensor) {
  return at::from_blob(tensor.data_ptr(), {static_cast<int64_t>(tensor.nbytes())},
                       at::TensorOptions().dtype(at::kByte));
}

inline at::Tensor borrowed(const at::Tensor& tensor) {
  return at::from_blob(tensor.data_ptr(), tensor.sizes(), tensor.strides(), tensor.options());
}

inline void check_cpu(const at::Tensor& tensor, const char* what) {
  if (!tensor.device().is_cpu() || tensor.is_sparse()) {
    throw Error(std::string("nano: ") + what + ": the nano backend takes dense CPU tensors, got one on " +
                tensor.device().str() + (tensor.is_sparse() ? " (sparse)" : ""));
  }
}

inline void check_one(const std::vector<at::Tensor>& tensors, const char* what) {
  if (tensors.size() != 1) {
    throw Error(std::string("nano: ") + what + " takes one tensor per rank, got " + std::to_string(tensors.size()));
  }
  check_cpu(tensors[0], what);
}

// The checks torch's own backends make before communicating, so a wrong argument is one rank's
// error (the group goes on) and not a failure of the group.
inline void check_op(RedOp op, at::ScalarType type, const char* what) {
  if (!ShmCollectives::reducible(type)) {
    throw Error(std::string("nano: ") + what + ": cannot reduce " + c10::toString(type) + " tensors");
  }
  if (op == c10d::ReduceOp::PREMUL_SUM) {
    throw Error(std::string("nano: ") + what + ": ReduceOp.PREMUL_SUM is NCCL's alone (Gloo has none either)");
  }
  const bool bitwise = op == c10d::ReduceOp::BAND || op == c10d::ReduceOp::BOR || op == c10d::ReduceOp::BXOR;
  if (bitwise && at::isFloatingType(type)) {
    throw Error(std::string("nano: ") + what + ": bitwise reductions need an integer dtype, got " +
                c10::toString(type));
  }
}

inline void check_like(const at::Tensor& tensor, const at::Tensor& like, const char* what) {
  check_cpu(tensor, what);
  if (tensor.scalar_type() != like.scalar_type() || tensor.numel() != like.numel()) {
    throw Error(std::string("nano: ") + what + ": expected a " + c10::toString(like.scalar_type()) + " tensor of " +
                std::to_string(like.numel()) + " elements, got a " + c10::toString(tensor.scalar_type()) +
                " tensor of " + std::to_string(tensor.numel()));
  }
}

// Every tensor of a list of lists, in order (a Work's outputs).
inline std::vector<at::Tensor> flattened(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> flat;
  for (const auto& list : lists) flat.insert(flat.end(), list.begin(), list.end());
  return flat;
}

// Runs `body` on a contiguous form of `tensor` and copies the result back when a copy was made.
template <class Body>
inline void on_contiguous(at::Tensor& tensor, Body body) {
  if (tensor.is_contiguous()) {
    body(tensor);
    return;
  }
  at::Tensor dense = tensor.contiguous();
  body(dense);
  tensor.copy_(dense);
}

}  // namespace nano::torch_backend_detail
