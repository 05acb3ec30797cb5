#include "launcher/launch/dry_run.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <sstream>

#include "core/cpulist.h"
#include "launcher/mpi/mpi_command.h"
#include "launcher/prepare/carried_env.h"
#include "launcher/prepare/launch_setup.h"

namespace nano {
namespace {

// The variables a rank gets that differ from nano-run's own.
Environment changed_variables(const Environment& env, const Environment& current) {
  Environment out;
  for (const auto& [name, value] : env) {
    auto it = current.find(name);
    if (it == current.end() || it->second != value) out[name] = value;
  }
  return out;
}

}  // namespace

DryRun dry_run(const LaunchOptions& options, const std::vector<std::string>& argv) {
  return dry_run(prepare(options, argv, Purpose::kDryRun));
}

DryRun dry_run(const Setup& s) {
  const LaunchOptions& options = s.options;
  DryRun d;
  d.backend = s.backend == LaunchBackend::kMpi ? "mpi" : "subprocess";
  for (const auto& note : s.notes) d.notes.push_back(worded_text(note, names_of(options.front_end)));
  if (!s.warning.empty()) d.notes.push_back(s.warning);
  Environment current = current_environment();
  for (const auto& g : s.groups) {
    for (int local = 0; local < g.size; ++local) {
      size_t r = static_cast<size_t>(g.first_rank + local);
      DryRunRank dr;
      dr.rank = static_cast<int>(r);
      dr.host = g.host;
      dr.cpus = s.rank_plans[r].cpus;
      dr.numa_nodes = s.rank_plans[r].numa_nodes;
      dr.threads = s.rank_plans[r].threads;
      dr.env = changed_variables(s.envs[r].env, current);
      d.ranks.push_back(dr);
    }
  }
  if (s.backend == LaunchBackend::kMpi) {
    ShimSpec spec = shim_spec_for(s, carried_environment(current, options.extra_env));
    spec.launcher_host = "<launcher>";
    d.command = mpi_command_for(s, spec);
  }
  return d;
}

std::string format_dry_run_table(const DryRun& plan) {
  std::ostringstream out;
  out << "backend: " << plan.backend << "\n";
  std::vector<std::vector<std::string>> rows = {{"rank", "host", "cpus", "numa", "threads"}};
  for (const auto& r : plan.ranks)
    rows.push_back({std::to_string(r.rank), r.host.empty() ? "this machine" : r.host, format_cpu_list(r.cpus),
                    format_cpu_list(r.numa_nodes), std::to_string(r.threads)});
  std::vector<size_t> width(5, 0);
  for (const auto& row : rows)
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out << line << "\n";
  }
  for (const auto& r : plan.ranks) {
    out << "rank " << r.rank << " environment:\n";
    for (const auto& [name, value] : r.env) out << "  " << name << "=" << value << "\n";
  }
  if (!plan.command.empty()) out << "mpirun command:\n  " << shell_join(plan.command) << "\n";
  for (const auto& n : plan.notes) out << "note: " << n << "\n";
  return out.str();
}

std::string format_dry_run_json(const DryRun& plan) {
  nlohmann::json j;
  j["backend"] = plan.backend;
  j["ranks"] = nlohmann::json::array();
  for (const auto& r : plan.ranks) {
    j["ranks"].push_back({{"rank", r.rank},
                          {"host", r.host},
                          {"cpus", r.cpus},
                          {"numa_nodes", r.numa_nodes},
                          {"threads", r.threads},
                          {"env", r.env}});
  }
  j["command"] = plan.command;
  j["notes"] = plan.notes;
  return j.dump(2) + "\n";
}

}  // namespace nano
