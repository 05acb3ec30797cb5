#include "launcher/prepare/slurm.h"

#include <algorithm>
#include <climits>

#include <nano/error.h>
#include "core/parse.h"

namespace nano {
namespace {

// Splits `text` at top-level commas (not those inside brackets).
std::vector<std::string> split_top_level(const std::string& text, const std::string& whole) {
  std::vector<std::string> parts;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) throw UsageError("bad Slurm node list '" + whole + "': unbalanced ']'");
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (depth != 0) throw UsageError("bad Slurm node list '" + whole + "': unbalanced '['");
  parts.push_back(current);
  return parts;
}

// Slurm's numbers are unsigned: digits only, no sign.
std::optional<int> slurm_number(const std::string& text, int max) {
  if (text.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const std::optional<long long> value = parse_integer(text, 0, max);
  if (!value) return std::nullopt;
  return static_cast<int>(*value);
}

int parse_number(const std::string& text, const std::string& whole) {
  const std::optional<int> value = slurm_number(text, 999999999);
  if (!value) throw UsageError("bad Slurm node list '" + whole + "': '" + text + "' is not a number");
  return *value;
}

// One name with bracket groups: the first group expanded, the rest recursively.
void expand_name(const std::string& name, const std::string& whole, std::vector<std::string>& out) {
  const auto open = name.find('[');
  if (open == std::string::npos) {
    if (!name.empty()) out.push_back(name);
    return;
  }
  const auto close = name.find(']', open);
  const std::string prefix = name.substr(0, open), suffix = name.substr(close + 1);
  for (const std::string& item : split_top_level(name.substr(open + 1, close - open - 1), whole)) {
    const auto dash = item.find('-');
    const std::string first = item.substr(0, dash);
    const int from = parse_number(first, whole);
    const int to = dash == std::string::npos ? from : parse_number(item.substr(dash + 1), whole);
    if (to < from) throw UsageError("bad Slurm node list '" + whole + "': range " + item + " runs backwards");
    for (int i = from; i <= to; ++i) {
      std::string digits = std::to_string(i);
      if (digits.size() < first.size()) digits.insert(0, first.size() - digits.size(), '0');  // node01
      expand_name(prefix + digits + suffix, whole, out);
    }
  }
}

}  // namespace

std::vector<std::string> expand_slurm_nodelist(const std::string& list) {
  std::vector<std::string> out;
  for (const std::string& part : split_top_level(list, list)) expand_name(part, list, out);
  return out;
}

std::vector<int> expand_slurm_counts(const std::string& counts) {
  std::vector<int> out;
  std::string item;
  auto bad = [&] { return UsageError("bad SLURM_TASKS_PER_NODE '" + counts + "': expected counts like 2(x3),1"); };
  size_t start = 0;
  while (start <= counts.size()) {
    size_t end = counts.find(',', start);
    if (end == std::string::npos) end = counts.size();
    item = counts.substr(start, end - start);
    const auto paren = item.find("(x");
    const std::string count = item.substr(0, paren);
    int repeat = 1;
    if (paren != std::string::npos) {
      if (item.back() != ')') throw bad();
      const std::string times = item.substr(paren + 2, item.size() - paren - 3);
      const std::optional<int> value = slurm_number(times, INT_MAX);
      if (!value) throw bad();
      repeat = *value;
    }
    const std::optional<int> slots = slurm_number(count, 999999999);
    if (!slots) throw bad();
    out.insert(out.end(), static_cast<size_t>(repeat), *slots);
    start = end + 1;
  }
  return out;
}

std::optional<std::vector<HostSlots>> slurm_allocation_hosts(const Environment& env) {
  auto get = [&](const char* name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  std::string list = get("SLURM_JOB_NODELIST");
  if (list.empty()) list = get("SLURM_NODELIST");
  if (list.empty()) return std::nullopt;
  const std::vector<std::string> nodes = expand_slurm_nodelist(list);
  const std::string tasks = get("SLURM_TASKS_PER_NODE");
  std::vector<int> counts = tasks.empty() ? std::vector<int>(nodes.size(), 1) : expand_slurm_counts(tasks);
  if (counts.size() != nodes.size()) {
    throw UsageError("the Slurm allocation lists " + std::to_string(nodes.size()) + " nodes (" + list + ") but " +
                     std::to_string(counts.size()) + " task counts (SLURM_TASKS_PER_NODE=" + tasks + ")");
  }
  std::vector<HostSlots> hosts;
  for (size_t i = 0; i < nodes.size(); ++i) hosts.push_back({nodes[i], counts[i]});
  return hosts;
}

std::optional<SlurmNodePart> slurm_node_part(const Environment& env) {
  auto get = [&](const char* name) {
    auto it = env.find(name);
    return it == env.end() ? std::string() : it->second;
  };
  auto number = [&](const char* name) {
    const std::string v = get(name);
    return slurm_number(v, 999999999).value_or(-1);
  };
  const int tasks = number("SLURM_STEP_NUM_TASKS"), nodes = number("SLURM_STEP_NUM_NODES");
  const int node = number("SLURM_NODEID"), job = number("SLURM_JOB_ID"), step = number("SLURM_STEP_ID");
  if (step < 0 || tasks <= 1 || nodes < 1 || node < 0) return std::nullopt;
  if (tasks != nodes) {
    throw UsageError("this is one of " + std::to_string(tasks) + " tasks of a Slurm step on " + std::to_string(nodes) +
                     " nodes: start one nano-run per node (srun --ntasks-per-node=1), or one for the whole "
                     "allocation (in the sbatch script or under salloc)");
  }
  const std::vector<std::string> list = expand_slurm_nodelist(get("SLURM_STEP_NODELIST"));
  if (list.empty())
    throw UsageError("SLURM_STEP_NODELIST is empty in a Slurm step of " + std::to_string(nodes) + " nodes");
  SlurmNodePart part;
  part.node = node;
  part.nodes = nodes;
  part.master = list.front();
  part.step_nodes = list;
  part.port = 20000 + static_cast<int>((static_cast<long long>(std::max(job, 0)) * 101 + step) % 30000);
  // A requeued job keeps its job and step ids: its restart count tells it from the run before,
  // which may still hold a checkpoint folder on a node Slurm lost (runtime/folder_claim/folder_claim.h).
  const int requeued = number("SLURM_RESTART_COUNT");
  part.run_id = "slurm-" + std::to_string(std::max(job, 0)) + "." + std::to_string(step) +
                (requeued > 0 ? "-r" + std::to_string(requeued) : "");
  return part;
}

}  // namespace nano
