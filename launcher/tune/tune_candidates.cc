#include "launcher/tune/tune_candidates.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

#include "core/parse.h"
#include "core/setting.h"

namespace nano {
namespace {

// The cores the planner gives ranks, as make_plan picks them.
std::vector<const Core*> planned_cores(const Topology& topology, const PlanOptions& plan) {
  std::vector<const Core*> cores;
  for (const Core& c : topology.cores)
    if (!c.efficiency || plan.use_efficiency_cores) cores.push_back(&c);
  if (cores.empty())  // only efficiency cores are allowed: the planner uses them
    for (const Core& c : topology.cores) cores.push_back(&c);
  return cores;
}

// Whether ranks of `per_rank` consecutive cores (in machine order) each stay inside one domain
// of `domain` or cover whole domains of it.
template <class Domain>
bool blocks_fit(const std::vector<const Core*>& cores, int per_rank, Domain domain) {
  std::map<int, int> size;  // cores per domain
  for (const Core* c : cores) ++size[domain(*c)];
  for (std::size_t first = 0; first < cores.size(); first += static_cast<std::size_t>(per_rank)) {
    std::map<int, int> covered;
    for (std::size_t i = first; i < first + static_cast<std::size_t>(per_rank); ++i) ++covered[domain(*cores[i])];
    if (covered.size() == 1) continue;  // inside one domain
    for (const auto& [d, n] : covered)
      if (n != size[d]) return false;  // part of a domain and more
  }
  return true;
}

}  // namespace

bool operator==(const Layout& a, const Layout& b) {
  return a.ranks == b.ranks && a.threads == b.threads && a.allocator == b.allocator;
}

std::string allocator_name(Allocator allocator) {
  switch (allocator) {
    case Allocator::kJemalloc: return "jemalloc";
    case Allocator::kTcmalloc: return "tcmalloc";
    case Allocator::kSystem: return "system";
    case Allocator::kAutomatic: break;
  }
  return "auto";
}

std::string layout_text(const Layout& layout) {
  std::ostringstream out;
  out << layout.ranks << (layout.ranks == 1 ? " rank x " : " ranks x ") << layout.threads
      << (layout.threads == 1 ? " thread, " : " threads, ")
      << (layout.allocator == Allocator::kAutomatic ? "automatic allocator" : allocator_name(layout.allocator));
  return out.str();
}

std::vector<int> even_rank_counts(const Topology& topology, const PlanOptions& plan) {
  const std::vector<const Core*> cores = planned_cores(topology, plan);
  const int total = static_cast<int>(cores.size());
  std::set<int> packages, numa, l3;
  for (const Core* c : cores) {
    packages.insert(c->package);
    numa.insert(c->numa_node);
    l3.insert(c->l3);
  }
  std::set<int> wanted = {1, total, static_cast<int>(packages.size()), static_cast<int>(numa.size()),
                          static_cast<int>(l3.size())};
  for (int k = 2; k <= total; k *= 2) {
    wanted.insert(k);          // a power of two of ranks...
    wanted.insert(total / k);  // ...or of cores per rank
  }
  std::vector<int> counts;
  for (int k : wanted) {
    if (k < 1 || k > total || total % k != 0) continue;
    const int per_rank = total / k;
    if (blocks_fit(cores, per_rank, [](const Core& c) { return c.package; }) &&
        blocks_fit(cores, per_rank, [](const Core& c) { return c.numa_node; }) &&
        blocks_fit(cores, per_rank, [](const Core& c) { return c.l3; }))
      counts.push_back(k);
  }
  return counts;  // 1 is always there: one rank covers every domain whole
}

std::vector<Layout> candidate_layouts(const Topology& topology, const PlanOptions& plan, const RecipeOptions& recipe,
                                      const CandidateRequest& request) {
  std::vector<int> counts = request.rank_counts.empty() ? even_rank_counts(topology, plan) : request.rank_counts;
  std::sort(counts.begin(), counts.end());
  if (request.max_ranks > 0) {
    counts.erase(std::remove_if(counts.begin(), counts.end(), [&](int k) { return k > request.max_ranks; }),
                 counts.end());
    if (counts.empty())
      throw SettingError(
          Setting::kMaxRanks, std::to_string(request.max_ranks),
          "{max_ranks} " + std::to_string(request.max_ranks) + " leaves no candidate of {tune_candidates}");
  }
  const std::vector<Allocator> allocators =
      request.allocators.empty() ? std::vector<Allocator>{recipe.allocator} : request.allocators;
  std::vector<Layout> layouts;
  for (int k : counts) {
    PlanOptions each = plan;
    each.num_processes = k;
    each.cores_per_process = 0;
    each.cpu_for_each_process.clear();
    Plan planned;
    try {
      planned = make_plan(topology, each);
    } catch (const SettingError& e) {
      // The planner's words for a rank count, said of the candidate.
      const std::string said = "{num_processes} " + std::to_string(k);
      std::string text = e.text();
      if (text.rfind(said, 0) == 0) text = text.substr(said.size());
      throw SettingError(Setting::kTuneCandidates, std::to_string(k),
                         "{tune_candidates} " + std::to_string(k) + (text.rfind(' ', 0) == 0 ? "" : ": ") + text);
    }
    for (Allocator a : allocators) {
      Layout l;
      l.ranks = k;
      l.threads = recipe.threads > 0 ? recipe.threads : planned.ranks.front().threads;
      l.allocator = a;
      layouts.push_back(l);
    }
  }
  return layouts;
}

namespace {

// The comma-separated items of `text`; none when it is empty or ends in a comma.
std::vector<std::string> comma_items(const std::string& text) {
  std::vector<std::string> items;
  if (text.empty() || text.back() == ',') return items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) items.push_back(item);
  return items;
}

template <class T>
void add_once(std::vector<T>& list, T value) {
  if (std::find(list.begin(), list.end(), value) == list.end()) list.push_back(value);
}

}  // namespace

std::vector<int> parse_rank_counts(const std::string& text) {
  const std::vector<std::string> items = comma_items(text);
  if (items.empty())
    throw SettingError(Setting::kTuneCandidates, text,
                       "{tune_candidates} expects rank counts such as 1,2,4, got '" + text + "'");
  std::vector<int> counts;
  for (const std::string& item : items) {
    const auto k = parse_integer(item, 1, 1 << 20);
    if (!k)
      throw SettingError(Setting::kTuneCandidates, text,
                         "{tune_candidates} expects rank counts such as 1,2,4; '" + item + "' in '" + text +
                             "' is not a count of at least 1");
    add_once(counts, static_cast<int>(*k));
  }
  return counts;
}

std::vector<Allocator> parse_allocator_list(const std::string& text) {
  const std::vector<std::string> items = comma_items(text);
  if (items.empty())
    throw SettingError(Setting::kTuneAllocators, text,
                       "{tune_allocators} expects a list such as jemalloc,default, got '" + text + "'");
  std::vector<Allocator> allocators;
  for (const std::string& item : items) {
    if (item == "jemalloc") {
      add_once(allocators, Allocator::kJemalloc);
    } else if (item == "tcmalloc") {
      add_once(allocators, Allocator::kTcmalloc);
    } else if (item == "default" || item == "system") {
      add_once(allocators, Allocator::kSystem);
    } else {
      throw SettingError(Setting::kTuneAllocators, text,
                         "{tune_allocators} expects jemalloc, tcmalloc or default (the C library's malloc); '" + item +
                             "' in '" + text + "' is none of them");
    }
  }
  return allocators;
}

}  // namespace nano
