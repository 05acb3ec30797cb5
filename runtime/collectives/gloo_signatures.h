#pragma once
// CallCheck's exchange over Gloo (runtime/collectives/collective_signature.h): where no shared memory joins
// a group's ranks, every rank's signature is compared in one small all-reduce of the group's own
// Gloo before the collective it describes. For the Gloo communicator and the torch backend.
#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <cstring>
#include <string>
#include <vector>

#include <nano/error.h>
#include "runtime/collectives/collective_signature.h"
#include "runtime/collectives/shm_collectives.h"
#include "runtime/rendezvous/rendezvous.h"

namespace nano {

/// Every rank's signature, in rank order, given this rank's (`mine`), through `group` (c10d's
/// ProcessGroupGloo, or a backend over it) of `size` ranks: when all match, `size` copies of
/// `mine`. Bounded by the group's own timeout; throws nano::Error("nano: the signature
/// exchange before <call> #<seq> (through Gloo) failed: ...").
template <class Group>
std::vector<CollectiveSignature> gather_signatures(Group& group, int size, const CollectiveSignature& mine) {
  // One MAX all-reduce of the signature's words and of their complements: every rank's words
  // are the same exactly when each maximum is this rank's word and each complement's maximum
  // (the complement of the minimum) is its complement. Gloo's all-reduce of a few words costs
  // what a 4-byte one does, its all-gather (here only after a difference, to name the ranks)
  // several times more.
  constexpr int kWords = sizeof(CollectiveSignature) / sizeof(int64_t);
  static_assert(sizeof(CollectiveSignature) % sizeof(int64_t) == 0, "a signature is whole words");
  int64_t words[kWords];
  std::memcpy(words, &mine, sizeof mine);
  std::vector<CollectiveSignature> calls(static_cast<std::size_t>(size), mine);
  try {
    at::Tensor bounds = at::empty({2 * kWords}, at::TensorOptions().dtype(at::kLong));
    int64_t* bound = bounds.data_ptr<int64_t>();
    for (int i = 0; i < kWords; ++i) {
      bound[i] = words[i];
      bound[kWords + i] = ~words[i];
    }
    std::vector<at::Tensor> reduced{bounds};
    c10d::AllreduceOptions opts;
    opts.reduceOp = c10d::ReduceOp::MAX;
    group.allreduce(reduced, opts)->wait();
    const int64_t* seen = bounds.data_ptr<int64_t>();
    bool same = true;
    for (int i = 0; i < kWords; ++i) same = same && seen[i] == words[i] && seen[kWords + i] == ~words[i];
    if (same) return calls;
    const auto bytes = at::TensorOptions().dtype(at::kByte);
    const int64_t n = static_cast<int64_t>(sizeof(CollectiveSignature));
    CollectiveSignature sent = mine;
    std::vector<at::Tensor> in{at::from_blob(&sent, {n}, bytes)};
    std::vector<std::vector<at::Tensor>> out(1);
    for (auto& call : calls) out[0].push_back(at::from_blob(&call, {n}, bytes));
    group.allgather(out, in)->wait();
  } catch (const std::exception& e) {
    throw Error("nano: the signature exchange before " + describe(mine) + " #" + std::to_string(mine.seq) +
                " (through Gloo) failed: " + first_line(e.what()));
  }
  return calls;
}

/// The same for a world whose all-reduces are hierarchical: this host's ranks compare their calls
/// in `host`'s shared memory (one fence, no data; throws naming the two calls), then the ranks of
/// this local index compare theirs through `across` (one rank per host). Every rank of a host
/// having made the same call, the host's signature is every one of its ranks': returns one per
/// world rank, rank r's being its host's (`host_of[r]`). A small all-reduce over the hosts instead
/// of over every rank. Call it from the thread that runs `host`'s collectives.
template <class Group>
std::vector<CollectiveSignature> gather_signatures_across(ShmCollectives& host, Group& across,
                                                          const std::vector<int>& host_of,
                                                          const CollectiveSignature& mine) {
  host.agree_on(mine);
  const std::vector<CollectiveSignature> per_host = gather_signatures(across, across.getSize(), mine);
  std::vector<CollectiveSignature> calls;
  for (int h : host_of) calls.push_back(per_host[static_cast<std::size_t>(h)]);
  return calls;
}

}  // namespace nano
