#include "runtime/collectives/host_layout.h"

#include <algorithm>

namespace nano {

HostLayout host_layout(const std::vector<std::string>& host_of_rank, int rank) {
  std::vector<std::string> names;         // hosts, by their lowest rank
  std::vector<std::vector<int>> members;  // each host's ranks, in order
  for (int r = 0; r < static_cast<int>(host_of_rank.size()); ++r) {
    const auto at = std::find(names.begin(), names.end(), host_of_rank[r]);
    if (at == names.end()) {
      names.push_back(host_of_rank[r]);
      members.push_back({r});
    } else {
      members[at - names.begin()].push_back(r);
    }
  }
  HostLayout layout;
  for (const std::string& name : host_of_rank) {
    layout.host_of.push_back(static_cast<int>(std::find(names.begin(), names.end(), name) - names.begin()));
  }
  layout.hosts = static_cast<int>(names.size());
  for (int h = 0; h < layout.hosts; ++h) {
    const auto at = std::find(members[h].begin(), members[h].end(), rank);
    if (at == members[h].end()) continue;
    layout.host = h;
    layout.local_rank = static_cast<int>(at - members[h].begin());
    layout.local_ranks = members[h];
  }
  layout.local_size = static_cast<int>(layout.local_ranks.size());
  bool even = true;
  std::string counts;
  for (const auto& m : members) {
    even = even && m.size() == members[0].size();
    counts += (counts.empty() ? "" : ", ") + std::to_string(m.size());
  }
  if (layout.hosts >= 2 && !even) layout.flat_because = "the hosts hold " + counts + " ranks";
  layout.hierarchical = layout.hosts >= 2 && even && layout.local_size >= 2;
  if (layout.hierarchical) {
    for (const auto& m : members) layout.peers.push_back(m[layout.local_rank]);
  }
  return layout;
}

int local_rank_of(const std::vector<int>& host_of, int rank) {
  return static_cast<int>(std::count(host_of.begin(), host_of.begin() + rank, host_of[rank]));
}

}  // namespace nano
