#pragma once
// CallCheck's exchange over Gloo (runtime/collective_signature.h): where no shared memory joins
// a group's ranks, every rank's signature travels in one small all-gather of the group's own
// Gloo before the collective it describes. For the Gloo communicator and the torch backend.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include <nano/error.h>
#include "runtime/collective_signature.h"
#include "runtime/rendezvous.h"

namespace nano {

/// Every rank's signature, in rank order, given this rank's (`mine`), through `group` (c10d's
/// ProcessGroupGloo, or a backend over it) of `size` ranks. Bounded by the group's own timeout;
/// throws nano::Error("nano: the signature exchange before <call> #<seq> (through Gloo) failed: ...").
template <class Group>
std::vector<CollectiveSignature> gather_signatures(Group& group, int size, const CollectiveSignature& mine) {
  std::vector<CollectiveSignature> calls(static_cast<std::size_t>(size));
  CollectiveSignature sent = mine;
  const auto bytes = at::TensorOptions().dtype(at::kByte);
  const int64_t n = static_cast<int64_t>(sizeof(CollectiveSignature));
  std::vector<at::Tensor> in{at::from_blob(&sent, {n}, bytes)};
  std::vector<std::vector<at::Tensor>> out(1);
  for (auto& call : calls) out[0].push_back(at::from_blob(&call, {n}, bytes));
  try {
    group.allgather(out, in)->wait();
  } catch (const std::exception& e) {
    throw Error("nano: the signature exchange before " + describe(mine) + " #" + std::to_string(mine.seq) +
                " (through Gloo) failed: " + first_line(e.what()));
  }
  return calls;
}

}  // namespace nano
