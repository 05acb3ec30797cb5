#include "runtime/collectives/collective_signature.h"

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <nano/error.h>

namespace nano {
namespace {

// As torch users name the op: an average is a sum divided by the ranks.
const char* op_name(ShmReduceOp op, int16_t average) {
  switch (op) {
    case ShmReduceOp::kSum: return average > 1 ? "AVG" : "SUM";
    case ShmReduceOp::kProduct: return "PRODUCT";
    case ShmReduceOp::kMin: return "MIN";
    case ShmReduceOp::kMax: return "MAX";
    case ShmReduceOp::kBitAnd: return "BAND";
    case ShmReduceOp::kBitOr: return "BOR";
    case ShmReduceOp::kBitXor: return "BXOR";
  }
  return "?";
}

// torch's spelling of a dtype ("float32", "int64", "bfloat16").
std::string dtype_name(int8_t dtype) {
  if (dtype < 0 || dtype >= static_cast<int8_t>(c10::ScalarType::NumOptions)) return "dtype " + std::to_string(dtype);
  switch (static_cast<c10::ScalarType>(dtype)) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Short: return "int16";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Bool: return "bool";
    default: return c10::toString(static_cast<c10::ScalarType>(dtype));
  }
}

}  // namespace

CollectiveSignature signature(CollectiveKind kind, int8_t dtype, int64_t count, int root) {
  CollectiveSignature call;
  call.kind = kind;
  call.dtype = dtype;
  call.count = count;
  call.root = static_cast<int16_t>(root);
  return call;
}

CollectiveSignature signature_of(CollectiveKind kind, const at::Tensor& tensor, int root) {
  return signature(kind, static_cast<int8_t>(tensor.scalar_type()), tensor.numel(), root);
}

bool same_call(const CollectiveSignature& a, const CollectiveSignature& b) {
  return a.seq == b.seq && a.count == b.count && a.kind == b.kind && a.op == b.op && a.dtype == b.dtype &&
         a.root == b.root && a.average == b.average;
}

std::size_t payload_bytes(const CollectiveSignature& call) {
  if (call.dtype < 0 || call.count <= 0) return 0;
  return static_cast<std::size_t>(call.count) * c10::elementSize(static_cast<c10::ScalarType>(call.dtype));
}

std::string describe(const CollectiveSignature& call) {
  const std::string tensor = dtype_name(call.dtype) + "[" + std::to_string(call.count) + "]";
  switch (call.kind) {
    case CollectiveKind::kAllReduce: return "all_reduce(" + tensor + ", " + op_name(call.op, call.average) + ")";
    case CollectiveKind::kBroadcast: return "broadcast(" + tensor + ", root " + std::to_string(call.root) + ")";
    case CollectiveKind::kAllGather: return "all_gather(" + tensor + ")";
    case CollectiveKind::kBarrier: return "barrier()";
    case CollectiveKind::kGather: return "gather(" + tensor + ", root " + std::to_string(call.root) + ")";
    case CollectiveKind::kScatter: return "scatter(" + tensor + ", root " + std::to_string(call.root) + ")";
    case CollectiveKind::kAllToAll: return "all_to_all(" + dtype_name(call.dtype) + ")";
  }
  return "an unknown collective";
}

int first_mismatch(const std::vector<CollectiveSignature>& calls) {
  for (std::size_t q = 1; q < calls.size(); ++q)
    if (!same_call(calls[q], calls[0])) return static_cast<int>(q);
  return -1;
}

std::string mismatch_message(const std::vector<CollectiveSignature>& calls, int q) {
  const CollectiveSignature& first = calls.at(0);
  const CollectiveSignature& other = calls.at(static_cast<std::size_t>(q));
  std::string text = "nano: collective #" + std::to_string(first.seq) + " does not match: rank 0 called " +
                     describe(first) + ", rank " + std::to_string(q) + " called " + describe(other);
  // Out of step since earlier: a rank made more or fewer collectives than its peers.
  if (other.seq != first.seq) text += " as its collective #" + std::to_string(other.seq);
  return text;
}

void CallCheck::agree(CollectiveSignature call) {
  if (!broken_.empty()) throw Error(broken_ + " (the group is broken since)");
  call.seq = ++seq_;
  std::vector<CollectiveSignature> calls;
  try {
    calls = exchange_(call);
  } catch (const std::exception& e) {
    fail(e.what());
    throw;
  }
  const int q = first_mismatch(calls);
  if (q > 0) {
    fail(mismatch_message(calls, q));
    throw Error(broken_);
  }
}

}  // namespace nano
