#pragma once
// The ranks of one host as threads of a test process, over one buffer of shared-memory areas:
// how the shared-memory collectives are tested without processes.
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "runtime/collectives/shm_collectives.h"

/// Runs `body(rank, collectives)` in `n` threads, each a rank over areas of `data` bytes whose
/// waits are bounded by `timeout`; returns what each returned, by rank.
template <class Result>
std::vector<Result> shm_ranks_as_threads(int n, int64_t data, std::chrono::milliseconds timeout,
                                         const std::function<Result(int, nano::ShmCollectives&)>& body) {
  const int64_t area = nano::ShmCollectives::kHeaderBytes + data;
  std::vector<char> memory(static_cast<std::size_t>(n * area));
  std::vector<char*> areas;
  for (int q = 0; q < n; ++q) areas.push_back(memory.data() + q * area);
  for (char* a : areas) nano::ShmCollectives::init_header(a);
  std::vector<Result> results(static_cast<std::size_t>(n));
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      nano::ShmCollectives shm(areas, data, r, timeout);
      results[static_cast<std::size_t>(r)] = body(r, shm);
    });
  }
  for (auto& t : ranks) t.join();
  return results;
}
