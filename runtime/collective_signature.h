#pragma once
// What one collective is, as every rank of a group must agree before any data moves: its
// number in the group's sequence, its kind, reduce op, dtype, element count and root. Ranks
// that call collectives which do not match (another size, dtype, op, root or kind) would
// otherwise exchange wrong bytes and return wrong numbers without a word; with the signatures
// compared first, every rank raises one error naming both calls. Pure: the record, its words
// and the comparison; the shared-memory layer (runtime/shm_collectives.h) carries them.
#include <cstdint>
#include <string>
#include <vector>

namespace nano {

/// How all_reduce combines the ranks' values (runtime/shm_collectives.h).
enum class ShmReduceOp : uint8_t { kSum, kProduct, kMin, kMax };

/// The kind of a collective.
enum class CollectiveKind : uint8_t { kAllReduce = 1, kBroadcast, kAllGather, kBarrier };

/// One rank's call, as it travels in shared memory (plain data, the same layout in every rank).
struct CollectiveSignature {
  uint64_t seq = 0;   ///< the group's collective number, from 1
  int64_t count = 0;  ///< elements of the tensor (all_gather: of one rank's input); 0 for a barrier
  CollectiveKind kind = CollectiveKind::kBarrier;
  ShmReduceOp op = ShmReduceOp::kSum;  ///< all_reduce's; kSum otherwise
  int8_t dtype = -1;                   ///< at::ScalarType's value; -1 for a barrier
  uint8_t pad = 0;
  int16_t root = -1;    ///< broadcast's root; -1 otherwise
  int16_t average = 1;  ///< all_reduce: the divisor of an average (1 = none)
};
static_assert(sizeof(CollectiveSignature) == 24, "a signature is three words in every rank");

/// Whether two calls are the same collective (every field, the sequence number included).
bool same_call(const CollectiveSignature& a, const CollectiveSignature& b);

/// The call in a user's words: "all_reduce(float32[1000], SUM)", "broadcast(int64[3], root 1)",
/// "all_gather(float32[4])", "barrier()".
std::string describe(const CollectiveSignature& call);

/// The first rank whose call differs from rank 0's (`calls[q]`, one per rank), or -1 when all
/// match. Every rank computes the same answer from the same calls.
int first_mismatch(const std::vector<CollectiveSignature>& calls);

/// The error every rank raises for `calls` where `first_mismatch` is `q` > 0:
/// "nano: collective #17 does not match: rank 0 called all_reduce(float32[1000], SUM), rank 1
/// called all_reduce(float32[1], SUM)". (The number is rank 0's.)
std::string mismatch_message(const std::vector<CollectiveSignature>& calls, int q);

}  // namespace nano
