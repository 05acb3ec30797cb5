#include "python/backend_rendezvous.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <sstream>
#include <vector>

#include <nano/error.h>
#include "runtime/rendezvous/job_store.h"
#include "runtime/rendezvous/rendezvous.h"

namespace nano {

namespace {

std::string seconds_text(std::chrono::milliseconds limit) {
  std::ostringstream out;
  out << limit.count() / 1000.0;
  return out.str();
}

}  // namespace

JobStore* job_store_under(c10::intrusive_ptr<c10d::Store> store) {
  while (auto* prefixed = dynamic_cast<c10d::PrefixStore*>(store.get())) store = prefixed->getUnderlyingStore();
  return dynamic_cast<JobStore*>(store.get());
}

void await_ranks(c10d::Store& store, const std::string& prefix, int rank, int size, std::chrono::milliseconds timeout,
                 std::chrono::milliseconds wait_for) {
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(prefix + std::to_string(r));
  try {
    store.wait(keys, std::max(wait_for, std::chrono::milliseconds(100)));
  } catch (const std::exception& e) {
    std::vector<int> missing;
    try {
      for (int r = 0; r < size; ++r) {
        if (!store.check({keys[r]})) missing.push_back(r);
      }
    } catch (const std::exception&) {
      throw Error("nano: rank " + std::to_string(rank) +
                  ": the nano backend's rendezvous failed: " + first_line(e.what()));
    }
    std::string names;
    for (int r : missing) names += (names.empty() ? "" : ", ") + std::to_string(r);
    throw Error("nano: rank " + std::to_string(rank) + ": " + std::to_string(missing.size()) + " of " +
                std::to_string(size) + " ranks did not join the nano process group within " + seconds_text(timeout) +
                " s (missing: " + names + ")");
  }
}

}  // namespace nano
