// Across hosts: which worlds take the hierarchical all-reduce (runtime/collectives/host_layout.h),
// table-tested; then ShmCollectives::all_reduce_across with the ranks of one host as threads of
// this process, the exchange between hosts standing in as H identical hosts (the slice times H),
// over areas small enough that the slices go through in many rounds.
#include "runtime/collectives/host_layout.h"

#include <ATen/ATen.h>
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/collectives/shm_collectives.h"
#include "tests/runtime/shm_threads.h"

TEST_CASE("host layout: hierarchical only where every host holds the same number of ranks, two or more") {
  struct Row {
    std::vector<std::string> hosts;
    int rank;
    bool hierarchical;
    std::string flat_because;
    int host, local_rank;
    std::vector<int> local_ranks, peers;
  };
  const std::vector<Row> rows = {
      {{"a", "a", "b", "b"}, 0, true, "", 0, 0, {0, 1}, {0, 2}},
      {{"a", "a", "b", "b"}, 3, true, "", 1, 1, {2, 3}, {1, 3}},
      // Ranks need not be grouped by host: hosts are numbered by their lowest rank.
      {{"b", "a", "b", "a"}, 1, true, "", 1, 0, {1, 3}, {0, 1}},
      {{"a", "b", "c", "a", "b", "c"}, 5, true, "", 2, 1, {2, 5}, {3, 4, 5}},
      {{"a", "a", "b"}, 2, false, "the hosts hold 2, 1 ranks", 1, 0, {2}, {}},
      {{"a", "a", "b", "c", "c", "c"}, 0, false, "the hosts hold 2, 1, 3 ranks", 0, 0, {0, 1}, {}},
      // One rank per host, or one host: flat, and nothing worth saying.
      {{"a", "b", "c"}, 1, false, "", 1, 0, {1}, {}},
      {{"a", "a"}, 1, false, "", 0, 1, {0, 1}, {}},
  };
  for (const Row& row : rows) {
    CAPTURE(row.rank);
    CAPTURE(row.flat_because);
    const nano::HostLayout got = nano::host_layout(row.hosts, row.rank);
    CHECK(got.hierarchical == row.hierarchical);
    CHECK(got.flat_because == row.flat_because);
    CHECK(got.host == row.host);
    CHECK(got.local_rank == row.local_rank);
    CHECK(got.local_ranks == row.local_ranks);
    CHECK(got.local_size == static_cast<int>(row.local_ranks.size()));
    CHECK(got.peers == row.peers);
    for (int r = 0; r < static_cast<int>(row.hosts.size()); ++r) {
      CHECK(got.host_of[r] == nano::host_layout(row.hosts, r).host);
    }
  }
}

TEST_CASE("local_rank_of: any rank's index among its host's ranks, as host_layout gives its own") {
  const std::vector<std::vector<std::string>> worlds{
      {"a", "a", "b", "b"}, {"a", "b", "a", "b"}, {"a", "b", "c", "a", "b", "c"}, {"a", "a", "b"}, {"a"}};
  for (const auto& world : worlds) {
    for (int r = 0; r < static_cast<int>(world.size()); ++r) {
      CAPTURE(r);
      const nano::HostLayout mine = nano::host_layout(world, r);
      for (int other = 0; other < static_cast<int>(world.size()); ++other) {
        CHECK(nano::local_rank_of(mine.host_of, other) == nano::host_layout(world, other).local_rank);
      }
    }
  }
  CHECK(nano::local_rank_of({0, 1, 0, 1}, 2) == 1);
  CHECK(nano::local_rank_of({0, 1, 0, 1}, 1) == 0);
}

TEST_CASE("own slices: contiguous, in rank order, sizes differing by at most one") {
  using Slice = std::pair<int64_t, int64_t>;
  CHECK(nano::ShmCollectives::own_slice(10, 3, 0) == Slice{0, 3});
  CHECK(nano::ShmCollectives::own_slice(10, 3, 1) == Slice{3, 3});
  CHECK(nano::ShmCollectives::own_slice(10, 3, 2) == Slice{6, 4});
  CHECK(nano::ShmCollectives::own_slice(2, 3, 0) == Slice{0, 0});
  CHECK(nano::ShmCollectives::own_slice(2, 3, 2) == Slice{1, 1});
  CHECK(nano::ShmCollectives::own_slice(0, 2, 1) == Slice{0, 0});
}

TEST_CASE("across blocks: a quarter of the tensor, from 1 MiB to 8 MiB") {
  using S = nano::ShmCollectives;
  CHECK(S::across_block(1000, 4) == (1 << 20) / 4);      // small: one block
  CHECK(S::across_block(1000000, 4) == (1 << 20) / 4);   // 4 MB: four blocks of 1 MiB
  CHECK(S::across_block(11000000, 2) == 11000000 / 4);   // 22 MB of bfloat16: four of 5.5 MB
  CHECK(S::across_block(11000000, 4) == (8 << 20) / 4);  // 44 MB: six blocks of 8 MiB
  CHECK(S::across_block(0, 4) == (1 << 20) / 4);
}

namespace {

// `n` ranks of one host as threads over areas of `data` bytes; each all-reduces rank-dependent
// values of `dtype` with `op` across `hosts` identical hosts. Returns each rank's result.
std::vector<at::Tensor> across_identical_hosts(int n, int64_t data, int hosts, int64_t count, at::ScalarType dtype,
                                               nano::ShmReduceOp op, int average_over) {
  return shm_ranks_as_threads<at::Tensor>(n, data, std::chrono::seconds(10), [&](int r, nano::ShmCollectives& shm) {
    at::Tensor t = (at::arange(count, at::kLong) % 5 + r + 1).to(dtype);
    shm.all_reduce_across(t, op, average_over, [&](at::Tensor& slice) {
      // H hosts of the same sums; ended by the wait, so a block gathered early shows.
      return std::function<void()>([slice, op, hosts]() mutable {
        if (op == nano::ShmReduceOp::kSum) slice.mul_(hosts);
      });
    });
    return t;
  });
}

}  // namespace

TEST_CASE("all_reduce_across: every rank gets the whole reduction, over many rounds, blocks and odd sizes") {
  for (const int64_t count : {0L, 1L, 2L, 7L, 1000L, 10003L}) {
    for (const int n : {2, 3}) {
      CAPTURE(count);
      CAPTURE(n);
      // 256 bytes per area: a 10003-element tensor goes through in a hundred rounds and more.
      const auto got = across_identical_hosts(n, 256, 2, count, at::kFloat, nano::ShmReduceOp::kSum, 1);
      at::Tensor want = at::zeros({count});
      for (int r = 0; r < n; ++r) want += 2 * (at::arange(count, at::kLong) % 5 + r + 1).to(at::kFloat);
      for (int r = 0; r < n; ++r) CHECK(at::equal(got[r], want));
    }
  }
  SUBCASE("several blocks: 5000003 floats are four blocks of a quarter and one of 3 elements") {
    const auto got = across_identical_hosts(2, 1 << 20, 3, 5000003, at::kFloat, nano::ShmReduceOp::kSum, 1);
    const at::Tensor base = (at::arange(5000003, at::kLong) % 5).to(at::kFloat);
    CHECK(at::equal(got[0], 3 * (2 * base + 3)));
    CHECK(at::equal(got[1], got[0]));
  }
  SUBCASE("an average over every rank of both hosts: floats scaled, integers truncated") {
    const auto floats = across_identical_hosts(2, 4096, 2, 999, at::kFloat, nano::ShmReduceOp::kSum, 4);
    at::Tensor base = (at::arange(999, at::kLong) % 5).to(at::kFloat);
    CHECK(at::allclose(floats[1], (2 * (2 * base + 3)) * 0.25f));
    const auto ints = across_identical_hosts(2, 4096, 2, 999, at::kInt, nano::ShmReduceOp::kSum, 4);
    CHECK(at::equal(ints[0], at::div(2 * (2 * base + 3), 4, "trunc").to(at::kInt)));
  }
  SUBCASE("bfloat16 sums in float; MAX needs nothing across identical hosts") {
    const auto sums = across_identical_hosts(3, 512, 2, 5000, at::kBFloat16, nano::ShmReduceOp::kSum, 1);
    at::Tensor base = (at::arange(5000, at::kLong) % 5).to(at::kFloat);
    CHECK(at::equal(sums[2].to(at::kFloat), 2 * (3 * base + 6)));
    const auto maxima = across_identical_hosts(3, 512, 2, 5000, at::kFloat, nano::ShmReduceOp::kMax, 1);
    CHECK(at::equal(maxima[0], base + 3));
  }
}

TEST_CASE("all_reduce_across: when a later block fails, the exchange under way ends before the error returns") {
  const auto seen =
      shm_ranks_as_threads<std::string>(2, 1 << 20, std::chrono::seconds(10), [](int, nano::ShmCollectives& shm) {
        at::Tensor t = at::ones({4000000});  // four blocks
        int started = 0;
        bool first_ended = false;
        try {
          shm.all_reduce_across(t, nano::ShmReduceOp::kSum, 1, [&](at::Tensor&) -> std::function<void()> {
            if (++started == 2) throw std::runtime_error("the exchange of block 2 failed");
            return [&] { first_ended = true; };
          });
        } catch (const std::exception& e) {
          return std::string(e.what()) + (first_ended ? " | block 1 ended first" : " | block 1 still open");
        }
        return std::string("no error");
      });
  CHECK(seen[0] == "the exchange of block 2 failed | block 1 ended first");
  CHECK(seen[1] == seen[0]);
}
