#pragma once
// What one collective is, as every rank of a group must agree before any data moves: its
// number in the group's sequence, its kind, reduce op, dtype, element count and root. Ranks
// that call collectives which do not match (another size, dtype, op, root or kind) would
// otherwise exchange wrong bytes and return wrong numbers without a word; with the signatures
// compared first, every rank raises one error naming both calls. The record, its words and the
// comparison are pure; the shared-memory layer (runtime/collectives/shm_collectives.h) carries signatures in
// its header, and CallCheck (below) gathers them through the peer library where no shared
// memory joins the ranks.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace at {
class Tensor;
}  // namespace at

namespace nano {

/// How all_reduce combines the ranks' values: the first four in shared memory
/// (runtime/collectives/shm_collectives.h); the bitwise ones only through the peer library (Gloo).
enum class ShmReduceOp : uint8_t { kSum, kProduct, kMin, kMax, kBitAnd, kBitOr, kBitXor };

/// The kind of a collective. Gather, scatter and all_to_all go only through the peer library.
enum class CollectiveKind : uint8_t { kAllReduce = 1, kBroadcast, kAllGather, kBarrier, kGather, kScatter, kAllToAll };

/// One rank's call, as it travels in shared memory (plain data, the same layout in every rank).
struct CollectiveSignature {
  uint64_t seq = 0;   ///< the group's collective number, from 1
  int64_t count = 0;  ///< elements of the tensor (all_gather, gather: of one rank's input; scatter: of
                      ///< one rank's output); 0 for a barrier; -1 where ranks may differ (all_to_all)
  CollectiveKind kind = CollectiveKind::kBarrier;
  ShmReduceOp op = ShmReduceOp::kSum;  ///< all_reduce's; kSum otherwise
  int8_t dtype = -1;                   ///< at::ScalarType's value; -1 for a barrier
  uint8_t pad = 0;
  int16_t root = -1;    ///< broadcast's, gather's and scatter's root; -1 otherwise
  int16_t average = 1;  ///< all_reduce: the divisor of an average (1 = none)
};
static_assert(sizeof(CollectiveSignature) == 24, "a signature is three words in every rank");

/// A call of `kind` on `count` elements of `dtype` (at::ScalarType's value) with `root` (-1:
/// none); seq 0 (numbered when made), op kSum.
CollectiveSignature signature(CollectiveKind kind, int8_t dtype, int64_t count, int root = -1);
/// The same for a call on `tensor`: its dtype and element count.
CollectiveSignature signature_of(CollectiveKind kind, const at::Tensor& tensor, int root = -1);

/// Whether two calls are the same collective (every field, the sequence number included).
bool same_call(const CollectiveSignature& a, const CollectiveSignature& b);

/// The bytes one rank's tensor of the call holds (count x the dtype's size; 0 for a barrier or
/// where ranks may differ).
std::size_t payload_bytes(const CollectiveSignature& call);

/// The call in a user's words: "all_reduce(float32[1000], SUM)", "broadcast(int64[3], root 1)",
/// "all_gather(float32[4])", "barrier()", "gather(float32[4], root 0)", "all_to_all(float32)".
std::string describe(const CollectiveSignature& call);

/// The first rank whose call differs from rank 0's (`calls[q]`, one per rank), or -1 when all
/// match. Every rank computes the same answer from the same calls.
int first_mismatch(const std::vector<CollectiveSignature>& calls);

/// The error every rank raises for `calls` where `first_mismatch` is `q` > 0:
/// "nano: collective #17 does not match: rank 0 called all_reduce(float32[1000], SUM), rank 1
/// called all_reduce(float32[1], SUM)". (The number is rank 0's.)
std::string mismatch_message(const std::vector<CollectiveSignature>& calls, int q);

/// The signature check of a group whose collectives go through a peer library (Gloo, MPI),
/// where no shared header carries the calls: before each call, every rank's signature is
/// gathered with one small all-gather of that library and compared before any data moves.
/// Not thread-safe: one thread makes a group's calls (as the peer library requires anyway).
class CallCheck {
 public:
  /// Every rank's signature, in rank order, given this rank's (`mine`); throws on failure.
  using Exchange = std::function<std::vector<CollectiveSignature>(const CollectiveSignature& mine)>;
  explicit CallCheck(Exchange exchange) : exchange_(std::move(exchange)) {}

  /// Numbers `call` (the group's next) and compares every rank's: throws nano::Error with
  /// mismatch_message on every rank when they differ. Once the group is broken (a mismatch, or
  /// a failure told to `fail`), every call throws that first cause again, with
  /// " (the group is broken since)", before any exchange.
  void agree(CollectiveSignature call);
  /// Runs `body` (the call's data movement) after `agree`; an error in either breaks the group
  /// (the peers' calls are out of step after it) and is rethrown.
  template <class Body>
  void run(const CollectiveSignature& call, Body body) {
    agree(call);
    try {
      body();
    } catch (const std::exception& e) {
      fail(e.what());
      throw;
    }
  }
  /// A call of this group failed with `why`: later calls fail at once with it.
  void fail(const std::string& why) {
    if (broken_.empty()) broken_ = why;
  }
  uint64_t calls() const { return seq_; }

 private:
  Exchange exchange_;
  uint64_t seq_ = 0;
  std::string broken_;  // why the group is broken ("" = it is not)
};

}  // namespace nano
