#include "core/planner.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include <nano/error.h>
#include "core/cpulist.h"
#include "core/setting.h"

namespace nano {
namespace {

using CoreList = std::vector<const Core*>;

// "0 and 1", "0, 1 and 2".
std::string join_and(const std::vector<int>& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += i + 1 == values.size() ? " and " : ", ";
    out += std::to_string(values[i]);
  }
  return out;
}

// Sizes of `n` parts of `total` that differ by at most one, larger parts first (43/43/42).
std::vector<int> even_split(int total, int n) {
  std::vector<int> sizes(n, total / n);
  for (int i = 0; i < total % n; ++i) ++sizes[i];
  return sizes;
}

// Groups cores by `key`, keeping machine order of both groups and cores.
std::vector<CoreList> group_by(const CoreList& cores,
                               const std::function<std::tuple<int, int, int>(const Core&)>& key) {
  std::vector<CoreList> groups;
  std::map<std::tuple<int, int, int>, std::size_t> slot;
  for (const Core* c : cores) {
    auto k = key(*c);
    auto found = slot.find(k);
    if (found == slot.end()) {
      slot.emplace(k, groups.size());
      groups.push_back({c});
    } else {
      groups[found->second].push_back(c);
    }
  }
  return groups;
}

// Chooses the cores of each of `n` ranks. `per_rank` > 0 gives every rank exactly that many
// cores; 0 shares all cores out evenly. Ranks stay inside the finest locality domain (L3,
// NUMA node, package) whose count divides n and whose domains are big enough; when none fits,
// ranks take contiguous runs of machine order, which keeps spans to a minimum.
std::vector<CoreList> assign_cores(const CoreList& cores, int n, int per_rank) {
  using Key = std::function<std::tuple<int, int, int>(const Core&)>;
  struct Grouping {
    Key key;
    // Staying inside a NUMA node is worth unequal ranks (memory bandwidth and latency);
    // staying inside an L3 domain or a package that shares one NUMA node is not.
    bool must_balance;
  };
  const std::vector<Grouping> groupings = {
      {[](const Core& c) { return std::make_tuple(c.package, c.numa_node, c.l3); }, true},
      {[](const Core& c) { return std::make_tuple(0, c.numa_node, 0); }, false},
      {[](const Core& c) { return std::make_tuple(c.package, 0, 0); }, true},
  };
  for (const Grouping& grouping : groupings) {
    std::vector<CoreList> groups = group_by(cores, grouping.key);
    const int g = static_cast<int>(groups.size());
    if (g <= 1 || n % g != 0) continue;
    const int ranks_per_group = n / g;
    const int need = ranks_per_group * std::max(per_rank, 1);
    if (!std::all_of(groups.begin(), groups.end(),
                     [&](const CoreList& group) { return static_cast<int>(group.size()) >= need; }))
      continue;
    std::vector<CoreList> out;
    for (const CoreList& group : groups) {
      const std::vector<int> sizes = per_rank > 0 ? std::vector<int>(ranks_per_group, per_rank)
                                                  : even_split(static_cast<int>(group.size()), ranks_per_group);
      std::size_t at = 0;
      for (int size : sizes) {
        out.emplace_back(group.begin() + at, group.begin() + at + size);
        at += size;
      }
    }
    if (grouping.must_balance) {
      const auto [low, high] = std::minmax_element(
          out.begin(), out.end(), [](const CoreList& a, const CoreList& b) { return a.size() < b.size(); });
      if (high->size() - low->size() > 1) continue;
    }
    return out;
  }
  const std::vector<int> sizes =
      per_rank > 0 ? std::vector<int>(n, per_rank) : even_split(static_cast<int>(cores.size()), n);
  std::vector<CoreList> out;
  std::size_t at = 0;
  for (int size : sizes) {
    out.emplace_back(cores.begin() + at, cores.begin() + at + size);
    at += size;
  }
  return out;
}

RankPlan rank_from_cores(int rank, const CoreList& cores, bool logical) {
  RankPlan r;
  r.rank = rank;
  std::set<int> nodes;
  for (const Core* c : cores) {
    if (logical)
      r.cpus.insert(r.cpus.end(), c->pus.begin(), c->pus.end());
    else
      r.cpus.push_back(c->pus.front());
    nodes.insert(c->numa_node);
  }
  std::sort(r.cpus.begin(), r.cpus.end());
  r.cpus.erase(std::unique(r.cpus.begin(), r.cpus.end()), r.cpus.end());
  r.numa_nodes.assign(nodes.begin(), nodes.end());
  r.threads = logical ? static_cast<int>(r.cpus.size()) : static_cast<int>(cores.size());
  return r;
}

void note_spans(Plan& plan, const std::vector<CoreList>& rank_cores) {
  for (std::size_t i = 0; i < rank_cores.size(); ++i) {
    const RankPlan& r = plan.ranks[i];
    if (r.numa_nodes.size() > 1) {
      plan.notes.push_back("rank " + std::to_string(r.rank) + " spans NUMA nodes " + join_and(r.numa_nodes));
      continue;
    }
    std::set<int> packages;
    for (const Core* c : rank_cores[i]) packages.insert(c->package);
    if (packages.size() > 1)
      plan.notes.push_back("rank " + std::to_string(r.rank) + " spans packages " +
                           join_and(std::vector<int>(packages.begin(), packages.end())));
  }
}

Plan explicit_plan(const Topology& topo, const PlanOptions& options) {
  const auto flag_error = [](const std::string& text) {
    return SettingError(Setting::kCpuForEachProcess, "", "{cpu_for_each_process}" + text);
  };
  if (options.cores_per_process != 0)
    throw SettingError(Setting::kCpuForEachProcess, "",
                       "{cpu_for_each_process} and {cores_per_process} cannot be used together");
  const auto& lists = options.cpu_for_each_process;
  const int n = static_cast<int>(lists.size());
  if (options.num_processes != 0 && options.num_processes != n)
    throw flag_error(" gives " + std::to_string(n) + (n == 1 ? " list" : " lists") + " but {num_processes} is " +
                     std::to_string(options.num_processes));

  std::map<int, const Core*> core_of;
  for (const Core& c : topo.cores)
    for (int pu : c.pus) core_of[pu] = &c;
  std::map<int, int> owner;  // CPU -> rank
  Plan plan;
  std::vector<CoreList> rank_cores;
  for (int rank = 0; rank < n; ++rank) {
    if (lists[rank].empty()) throw flag_error(": the CPU list of rank " + std::to_string(rank) + " is empty");
    std::vector<int> cpus = lists[rank];
    std::sort(cpus.begin(), cpus.end());
    cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
    CoreList cores;
    for (int cpu : cpus) {
      if (!std::binary_search(topo.present_pus.begin(), topo.present_pus.end(), cpu))
        throw flag_error(": CPU " + std::to_string(cpu) + " does not exist on this machine");
      auto found = core_of.find(cpu);
      if (found == core_of.end())
        throw flag_error(": CPU " + std::to_string(cpu) +
                         " is not allowed (allowed: " + format_cpu_list(topo.allowed_pus) + ")");
      auto [it, fresh] = owner.emplace(cpu, rank);
      if (!fresh)
        throw flag_error(": CPU " + std::to_string(cpu) + " is listed for rank " + std::to_string(it->second) +
                         " and rank " + std::to_string(rank));
      if (std::find(cores.begin(), cores.end(), found->second) == cores.end()) cores.push_back(found->second);
    }
    RankPlan r;
    r.rank = rank;
    r.cpus = cpus;
    std::set<int> nodes;
    for (const Core* c : cores) nodes.insert(c->numa_node);
    r.numa_nodes.assign(nodes.begin(), nodes.end());
    r.threads = static_cast<int>(cores.size());
    plan.ranks.push_back(std::move(r));
    rank_cores.push_back(std::move(cores));
  }
  // The user chose; still say when two ranks share a physical core through SMT siblings.
  for (const Core& c : topo.cores) {
    std::set<int> ranks;
    for (int pu : c.pus) {
      auto it = owner.find(pu);
      if (it != owner.end()) ranks.insert(it->second);
    }
    if (ranks.size() > 1)
      plan.notes.push_back("ranks " + join_and(std::vector<int>(ranks.begin(), ranks.end())) +
                           " share the physical core of CPUs " + format_cpu_list(c.pus));
  }
  note_spans(plan, rank_cores);
  return plan;
}

}  // namespace

std::vector<std::vector<int>> parse_cpu_for_each_process(const std::string& text) {
  try {
    return parse_cpu_lists(text);
  } catch (const UsageError& e) {
    throw SettingError(Setting::kCpuForEachProcess, text, std::string("{cpu_for_each_process}: ") + e.what());
  }
}

void check_num_processes(int num_processes) {
  if (num_processes < 1)
    throw SettingError(Setting::kNumProcesses, std::to_string(num_processes),
                       "{num_processes} must be at least 1, got " + std::to_string(num_processes));
}

Plan make_plan(const Topology& topo, const PlanOptions& options) {
  if (options.num_processes < 0) check_num_processes(options.num_processes);
  if (options.cores_per_process < 0)
    throw SettingError(Setting::kCoresPerProcess, std::to_string(options.cores_per_process),
                       "{cores_per_process} must be at least 1, got " + std::to_string(options.cores_per_process));
  if (topo.cores.empty()) throw Error("no usable CPU on " + topo.source);
  if (!options.cpu_for_each_process.empty()) return explicit_plan(topo, options);

  Plan plan;
  CoreList usable;
  std::vector<int> left_out;
  for (const Core& c : topo.cores) {
    if (c.efficiency && !options.use_efficiency_cores)
      left_out.insert(left_out.end(), c.pus.begin(), c.pus.end());
    else
      usable.push_back(&c);
  }
  if (usable.empty()) {  // only efficiency cores are allowed: use them rather than nothing
    for (const Core& c : topo.cores) usable.push_back(&c);
    left_out.clear();
  }
  if (!left_out.empty())
    plan.notes.push_back("efficiency cores (CPUs " + format_cpu_list(left_out) +
                         ") are left out; {use_efficiency_cores} uses them");

  const int cores = static_cast<int>(usable.size());
  const std::string usable_text = std::to_string(cores) + " usable physical " + (cores == 1 ? "core" : "cores");
  const int k = options.cores_per_process;
  int n = options.num_processes;
  if (n == 0) {
    if (k > cores)
      throw SettingError(Setting::kCoresPerProcess, std::to_string(k),
                         "{cores_per_process} " + std::to_string(k) + " is more than the " + usable_text);
    n = k > 0 ? cores / k : 1;
  } else if (k == 0 && n > cores && !options.oversubscribe) {
    throw SettingError(Setting::kNumProcesses, std::to_string(n),
                       "{num_processes} " + std::to_string(n) + " is more than the " + usable_text +
                           " (use {oversubscribe} to share cores)");
  } else if (k > 0 && n * k > cores && !options.oversubscribe) {
    throw SettingError(Setting::kNumProcesses, std::to_string(n),
                       "{num_processes} " + std::to_string(n) + " with {cores_per_process} " + std::to_string(k) +
                           " needs " + std::to_string(n * k) + " physical cores but there are only " + usable_text +
                           " (use {oversubscribe} to share cores)");
  }

  const int per_rank = std::min(std::max(k, 1), cores);
  std::vector<CoreList> rank_cores;
  if (static_cast<long>(n) * per_rank > cores) {
    // Oversubscribed: deal cores round-robin so the sharing is spread evenly.
    for (int r = 0; r < n; ++r) {
      CoreList list;
      for (int j = 0; j < per_rank; ++j) list.push_back(usable[(static_cast<long>(r) * per_rank + j) % cores]);
      rank_cores.push_back(std::move(list));
    }
    plan.notes.push_back(std::to_string(n) + " ranks share " + usable_text +
                         " (oversubscribed: ranks compete for cores)");
  } else {
    rank_cores = assign_cores(usable, n, k);
    const auto [low, high] = std::minmax_element(
        rank_cores.begin(), rank_cores.end(), [](const CoreList& a, const CoreList& b) { return a.size() < b.size(); });
    if (high->size() - low->size() > 1)
      plan.notes.push_back("ranks get " + std::to_string(low->size()) + " to " + std::to_string(high->size()) +
                           " cores so that each stays inside its NUMA node (the nodes have "
                           "unequal usable cores)");
    if (k > 0 && n * k < cores) {
      std::vector<int> idle;
      std::set<const Core*> used;
      for (const CoreList& l : rank_cores) used.insert(l.begin(), l.end());
      for (const Core* c : usable)
        if (!used.count(c)) idle.push_back(c->pus.front());
      plan.notes.push_back(std::to_string(cores - n * k) + " of the " + usable_text + " stay idle (CPUs " +
                           format_cpu_list(idle) + "): " + std::to_string(n) + " ranks x " + std::to_string(k) +
                           " cores");
    }
  }
  for (int r = 0; r < n; ++r) plan.ranks.push_back(rank_from_cores(r, rank_cores[r], options.use_logical_cores));
  note_spans(plan, rank_cores);
  return plan;
}

}  // namespace nano
