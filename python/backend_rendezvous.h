#pragma once
// How the `nano` backend's ranks meet in the store torch gives it: whether the store is nano's
// job store, and a bounded wait for every rank.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

namespace nano {

class JobStore;

/// The job store under torch's PrefixStores, if the process group was made on one; else null.
JobStore* job_store_under(c10::intrusive_ptr<c10d::Store> store);

/// Waits until every rank of `size` has set "<prefix><rank>", at most `wait_for` (what is left
/// of `timeout`, the bound the message names; at least a last look). Throws Error naming the
/// missing ranks.
void await_ranks(c10d::Store& store, const std::string& prefix, int rank, int size, std::chrono::milliseconds timeout,
                 std::chrono::milliseconds wait_for);

}  // namespace nano
