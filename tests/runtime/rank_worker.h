#pragma once
// What the rank worker's files share (rank_worker.cc runs the scenarios, rank_worker_collectives.cc
// holds those of the communicator alone): the check that counts a scenario's failures, and the
// communicator scenarios' entry points.
#include <iostream>
#include <sstream>
#include <string>

#include <nano/context.h>

namespace nano::test {

/// The FAIL lines printed so far, and the "<scenario> rank R" they name.
inline int failures = 0;
inline std::string tag;

/// Unless `ok`: prints "FAIL <tag>: <what>" and counts it.
inline void check(bool ok, const std::string& what) {
  if (!ok) {
    std::cout << "FAIL " << tag << ": " << what << std::endl;
    ++failures;
  }
}

/// `v` with all 17 significant digits, for messages.
inline std::string str(double v) {
  std::ostringstream out;
  out.precision(17);
  out << v;
  return out.str();
}

/// collectives: rank-filled all-reduce (float, double, bfloat16; sum and average, asynchronous,
/// 6 MB), broadcast from every root, gather, barrier, and an unsupported dtype refused.
void scenario_collectives(nano::World& w);

/// peer-exits: rank 1 dies without a word; rank 0's shared-memory all-reduce must fail naming it.
void scenario_peer_exits(nano::World& w);

/// mismatch, mismatch-small, mismatch-root (`kind`): collectives that do not match fail on both
/// ranks, naming both calls.
void scenario_mismatch(nano::World& w, const std::string& kind);

}  // namespace nano::test
