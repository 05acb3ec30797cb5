// A collective's signature (runtime/collectives/collective_signature.h): its words and the comparison,
// table-tested; then ShmCollectives with mismatched calls, two ranks as two threads of this
// process over one buffer: every rank raises the same line naming both calls, nothing of a
// peer's data is read, and the group stays broken.
#include "runtime/collectives/collective_signature.h"

#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/collectives/shm_collectives.h"
#include "tests/common/error_of.h"
#include "tests/runtime/shm_threads.h"

using nano::CollectiveKind;
using nano::CollectiveSignature;

namespace {

CollectiveSignature all_reduce(uint64_t seq, at::ScalarType type, int64_t count,
                               nano::ShmReduceOp op = nano::ShmReduceOp::kSum, int16_t average = 1) {
  CollectiveSignature s;
  s.seq = seq;
  s.kind = CollectiveKind::kAllReduce;
  s.dtype = static_cast<int8_t>(type);
  s.count = count;
  s.op = op;
  s.average = average;
  return s;
}

CollectiveSignature broadcast(uint64_t seq, at::ScalarType type, int64_t count, int16_t root) {
  CollectiveSignature s;
  s.seq = seq;
  s.kind = CollectiveKind::kBroadcast;
  s.dtype = static_cast<int8_t>(type);
  s.count = count;
  s.root = root;
  return s;
}

CollectiveSignature barrier(uint64_t seq) {
  CollectiveSignature s;
  s.seq = seq;
  return s;
}

}  // namespace

TEST_CASE("describe: a call in torch's words") {
  struct Row {
    CollectiveSignature call;
    std::string words;
  };
  CollectiveSignature gather = broadcast(1, at::kLong, 3, -1);
  gather.kind = CollectiveKind::kAllGather;
  CollectiveSignature to_root = broadcast(1, at::kFloat, 4, 0);
  to_root.kind = CollectiveKind::kGather;
  CollectiveSignature from_root = broadcast(1, at::kFloat, 2, 1);
  from_root.kind = CollectiveKind::kScatter;
  CollectiveSignature exchange = broadcast(1, at::kInt, -1, -1);
  exchange.kind = CollectiveKind::kAllToAll;
  const std::vector<Row> table = {
      {all_reduce(1, at::kFloat, 1000), "all_reduce(float32[1000], SUM)"},
      {all_reduce(1, at::kDouble, 1, nano::ShmReduceOp::kMax), "all_reduce(float64[1], MAX)"},
      {all_reduce(1, at::kBFloat16, 8, nano::ShmReduceOp::kSum, 4), "all_reduce(bfloat16[8], AVG)"},
      {broadcast(1, at::kLong, 3, 1), "broadcast(int64[3], root 1)"},
      {gather, "all_gather(int64[3])"},
      {barrier(1), "barrier()"},
      {all_reduce(1, at::kInt, 2, nano::ShmReduceOp::kBitXor), "all_reduce(int32[2], BXOR)"},
      {to_root, "gather(float32[4], root 0)"},
      {from_root, "scatter(float32[2], root 1)"},
      {exchange, "all_to_all(int32)"},
  };
  for (const Row& row : table) CHECK(nano::describe(row.call) == row.words);
}

TEST_CASE("CallCheck: numbers each call, compares every rank's before the body, and stays broken") {
  // The peer's calls as an exchange would return them: rank 1 answers with `theirs`.
  CollectiveSignature theirs;
  int exchanges = 0;
  nano::CallCheck check([&](const CollectiveSignature& mine) {
    ++exchanges;
    CollectiveSignature peer = theirs;
    peer.seq = mine.seq;
    return std::vector<CollectiveSignature>{mine, peer};
  });
  int bodies = 0;
  theirs = all_reduce(0, at::kFloat, 1000);
  check.run(all_reduce(0, at::kFloat, 1000), [&] { ++bodies; });
  CHECK(check.calls() == 1);
  CHECK(bodies == 1);

  theirs = all_reduce(0, at::kFloat, 1);
  const std::string line =
      "nano: collective #2 does not match: rank 0 called all_reduce(float32[1000], SUM), rank 1 called "
      "all_reduce(float32[1], SUM)";
  std::string seen;
  try {
    check.run(all_reduce(0, at::kFloat, 1000), [&] { ++bodies; });
  } catch (const std::exception& e) {
    seen = e.what();
  }
  CHECK(seen == line);
  CHECK(bodies == 1);  // no data moved

  // Broken: the next call fails at once, before any exchange.
  theirs = all_reduce(0, at::kFloat, 1000);
  seen.clear();
  try {
    check.agree(all_reduce(0, at::kFloat, 1000));
  } catch (const std::exception& e) {
    seen = e.what();
  }
  CHECK(seen == line + " (the group is broken since)");
  CHECK(exchanges == 2);
}

TEST_CASE("CallCheck: a failed exchange or body breaks the group with its own cause") {
  bool exchange_fails = false;
  nano::CallCheck check([&](const CollectiveSignature& mine) -> std::vector<CollectiveSignature> {
    if (exchange_fails) throw std::runtime_error("nano: gloo: peer rank 1 closed the connection");
    return {mine, mine};
  });
  SUBCASE("the body") {
    CHECK_THROWS_WITH(check.run(barrier(0), [] { throw std::runtime_error("nano: barrier failed"); }),
                      "nano: barrier failed");
    CHECK_THROWS_WITH(check.agree(barrier(0)), "nano: barrier failed (the group is broken since)");
  }
  SUBCASE("the exchange") {
    exchange_fails = true;
    CHECK_THROWS_WITH(check.agree(barrier(0)), "nano: gloo: peer rank 1 closed the connection");
    exchange_fails = false;
    CHECK_THROWS_WITH(check.agree(barrier(0)),
                      "nano: gloo: peer rank 1 closed the connection (the group is broken since)");
  }
}

TEST_CASE("first_mismatch and its message: every rank against rank 0") {
  struct Row {
    std::vector<CollectiveSignature> calls;
    int mismatch;
    std::string message;
  };
  const std::vector<Row> table = {
      {{all_reduce(17, at::kFloat, 1000), all_reduce(17, at::kFloat, 1000)}, -1, ""},
      {{all_reduce(17, at::kFloat, 1000), all_reduce(17, at::kFloat, 1)},
       1,
       "nano: collective #17 does not match: rank 0 called all_reduce(float32[1000], SUM), rank 1 called "
       "all_reduce(float32[1], SUM)"},
      {{all_reduce(2, at::kFloat, 4), all_reduce(2, at::kDouble, 4)},
       1,
       "nano: collective #2 does not match: rank 0 called all_reduce(float32[4], SUM), rank 1 called "
       "all_reduce(float64[4], SUM)"},
      {{broadcast(3, at::kFloat, 4, 0), broadcast(3, at::kFloat, 4, 1)},
       1,
       "nano: collective #3 does not match: rank 0 called broadcast(float32[4], root 0), rank 1 called "
       "broadcast(float32[4], root 1)"},
      {{all_reduce(5, at::kFloat, 3000000), barrier(5), all_reduce(5, at::kFloat, 3000000)},
       1,
       "nano: collective #5 does not match: rank 0 called all_reduce(float32[3000000], SUM), rank 1 called "
       "barrier()"},
      {{barrier(9), barrier(9), barrier(9), all_reduce(9, at::kFloat, 1, nano::ShmReduceOp::kSum, 4)},
       3,
       "nano: collective #9 does not match: rank 0 called barrier(), rank 3 called all_reduce(float32[1], AVG)"},
      {{all_reduce(4, at::kFloat, 2), all_reduce(4, at::kFloat, 2, nano::ShmReduceOp::kMin)},
       1,
       "nano: collective #4 does not match: rank 0 called all_reduce(float32[2], SUM), rank 1 called "
       "all_reduce(float32[2], MIN)"},
      // Out of step: the number says so.
      {{barrier(7), barrier(8)},
       1,
       "nano: collective #7 does not match: rank 0 called barrier(), rank 1 called "
       "barrier() as its collective #8"},
  };
  for (const Row& row : table) {
    CAPTURE(row.message);
    const int q = nano::first_mismatch(row.calls);
    CHECK(q == row.mismatch);
    if (q > 0) CHECK(nano::mismatch_message(row.calls, q) == row.message);
  }
}

namespace {

// Two ranks as two threads over one buffer of two areas; `body(rank, collectives)` runs in each
// and returns what it saw. Returns both.
std::vector<std::string> two_ranks(const std::function<std::string(int, nano::ShmCollectives&)>& body) {
  return shm_ranks_as_threads<std::string>(2, 1 << 16, std::chrono::seconds(5), body);
}

using nano::test::error_of;

}  // namespace

TEST_CASE("shared memory: calls that match move data; calls that do not fail on every rank, before data moves") {
  SUBCASE("matching calls, then sizes that differ (the first over several chunks)") {
    const auto seen = two_ranks([](int r, nano::ShmCollectives& shm) {
      at::Tensor t = at::full({100}, float(r + 1));
      shm.all_reduce(t);
      std::string out = std::to_string(t[0].item<float>()).substr(0, 3);
      at::Tensor mine = r == 0 ? at::ones({40000}) : at::ones({1}) * 7;
      out += "|" + error_of([&] { shm.all_reduce(mine); });
      out += "|" + std::to_string(mine[0].item<float>()).substr(0, 3);
      // Broken since: every later collective fails at once with the same cause.
      out += "|" + error_of([&] { shm.barrier(); });
      return out;
    });
    const std::string line =
        "nano: collective #2 does not match: rank 0 called all_reduce(float32[40000], SUM), rank 1 called "
        "all_reduce(float32[1], SUM)";
    CHECK(seen[0] == "3.0|" + line + "|1.0|" + line + " (the group is broken since)");
    CHECK(seen[1] == "3.0|" + line + "|7.0|" + line + " (the group is broken since)");
  }
  SUBCASE("a broadcast from another root on each rank: each keeps nothing of the other's") {
    const auto seen = two_ranks([](int r, nano::ShmCollectives& shm) {
      at::Tensor t = at::full({4}, float(r));
      return error_of([&] { shm.broadcast(t, r); }) + "|" + std::to_string(t[0].item<float>()).substr(0, 3);
    });
    const std::string line =
        "nano: collective #1 does not match: rank 0 called broadcast(float32[4], root 0), rank 1 called "
        "broadcast(float32[4], root 1)";
    CHECK(seen[0] == line + "|0.0");
    CHECK(seen[1] == line + "|1.0");
  }
  SUBCASE("an all-reduce of 12 MB on one rank, a barrier on the other: the barrier does not pass") {
    const auto seen = two_ranks([](int r, nano::ShmCollectives& shm) {
      if (r == 1) return error_of([&] { shm.barrier(); });
      at::Tensor t = at::ones({3000000});
      return error_of([&] { shm.all_reduce(t); });
    });
    const std::string line =
        "nano: collective #1 does not match: rank 0 called all_reduce(float32[3000000], SUM), rank 1 called barrier()";
    CHECK(seen[0] == line);
    CHECK(seen[1] == line);
  }
  SUBCASE("float32 on one rank, float64 on the other") {
    const auto seen = two_ranks([](int r, nano::ShmCollectives& shm) {
      at::Tensor t = at::ones({8}, r == 0 ? at::kFloat : at::kDouble);
      return error_of([&] { shm.all_reduce(t); });
    });
    CHECK(seen[0] ==
          "nano: collective #1 does not match: rank 0 called all_reduce(float32[8], SUM), rank 1 called "
          "all_reduce(float64[8], SUM)");
    CHECK(seen[1] == seen[0]);
  }
}
