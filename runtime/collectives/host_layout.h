#pragma once
// Where each rank of a world runs, and what that allows across hosts: the hierarchical
// all-reduce (a shared-memory reduce-scatter inside each host, an exchange between the ranks of
// the same local index on the other hosts, a shared-memory all-gather) needs every host to hold
// the same number of ranks, two or more. Pure: the torch backend feeds it every rank's host
// identity and acts on the answer.
#include <string>
#include <vector>

namespace nano {

/// One rank's place in a world spread over hosts.
struct HostLayout {
  int host = 0;                  ///< this rank's host, numbered by the lowest rank each host holds
  int hosts = 1;                 ///< how many hosts the world spans
  int local_rank = 0;            ///< this rank's index among its host's ranks (in rank order)
  int local_size = 1;            ///< ranks on this rank's host
  std::vector<int> local_ranks;  ///< the world ranks on this rank's host, in order
  std::vector<int> peers;        ///< the world ranks of this local index, one per host, by host
  std::vector<int> host_of;      ///< every world rank's host
  /// Whether the hierarchical all-reduce applies: two or more hosts, each holding the same
  /// number of ranks, two or more.
  bool hierarchical = false;
  /// Why it does not where the world spans hosts that share memory within ("the hosts hold 2, 1
  /// ranks"), for the log; "" otherwise (one host, or one rank per host: the flat path is then
  /// the whole algorithm, nothing worth a line).
  std::string flat_because;
};

/// The layout of `rank` in a world where rank r runs on `host_of_rank[r]` (any string that is
/// equal exactly for ranks that share memory). Every rank computes the same hosts, counts and
/// answer from the same list.
HostLayout host_layout(const std::vector<std::string>& host_of_rank, int rank);

/// `rank`'s index among the ranks of its host, in rank order, where rank r runs on host
/// `host_of[r]` (HostLayout::host_of): any rank's local index, as host_layout gives its own.
int local_rank_of(const std::vector<int>& host_of, int rank);

}  // namespace nano
