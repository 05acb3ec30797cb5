#include "cli/launch_setup.h"

#include <netdb.h>
#include <sched.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <random>

#include <nano/error.h>
#include "cli/port.h"
#include "cli/self_exe.h"
#include "cli/slurm.h"
#include "cli/subprocess.h"
#include "env-init/cpulist.h"

#ifndef NANO_RUN_BUILD_PATH
#define NANO_RUN_BUILD_PATH ""
#endif
#ifndef NANO_RUN_INSTALL_PATH
#define NANO_RUN_INSTALL_PATH ""
#endif

namespace nano {
namespace {

bool is_executable_file(const std::string& path) {
  try {
    resolve_program(path, "");
    return true;
  } catch (const UsageError&) {
    return false;
  }
}

std::vector<int> allowed_cpus_of_this_process() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

// A name the ranks could not resolve would only show as their rendezvous timing out.
void check_resolves(const std::string& addr, const std::string& setting) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(addr.c_str(), nullptr, &hints, &found);
  if (found) freeaddrinfo(found);
  if (rc != 0) throw UsageError(setting + " " + addr + " does not resolve: " + gai_strerror(rc));
}

}  // namespace

std::string getenv_string(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string find_shim_executable(const LaunchOptions& o) {
  if (!o.shim_executable.empty()) return resolve_program(o.shim_executable, getenv_string("PATH"));
  std::vector<std::string> candidates;
  candidates.push_back(getenv_string("NANO_RUN"));
  std::string self = self_executable();
  std::string dir = self.substr(0, self.rfind('/') + 1);
  if (self.size() >= 8 && self.compare(self.size() - 8, 8, "nano-run") == 0) candidates.push_back(self);
  if (!dir.empty()) candidates.push_back(dir + "nano-run");
  candidates.push_back(NANO_RUN_BUILD_PATH);
  candidates.push_back(NANO_RUN_INSTALL_PATH);
  for (const auto& c : candidates)
    if (!c.empty() && is_executable_file(c)) return c;
  try {
    return resolve_program("nano-run", getenv_string("PATH"));
  } catch (const UsageError&) {
    throw UsageError(
        "the mpi backend needs nano-run for its rank shim and none was found (set NANO_RUN or "
        "use --backend subprocess)");
  }
}

std::string make_job_id() {
  std::random_device rd;
  char text[16];
  snprintf(text, sizeof text, "%06x", rd() & 0xffffff);
  return std::to_string(getpid()) + "-" + text;
}

std::string nano_python_folder() {
  const std::string folder = python_folder_for(self_executable());
  struct stat st {};
  return !folder.empty() && stat(folder.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? folder : "";
}

AttemptIdentity attempt_of(const Setup& s, const LaunchOptions& o) {
  return {s.job_id, s.run_id, s.restart_count, o.max_restarts};
}

Topology load_topology(const LaunchOptions& o) {
  if (!o.topology_xml.empty()) return load_xml_topology(o.topology_xml);
  if (!o.synthetic.empty()) return load_synthetic_topology(o.synthetic);
  return load_machine_topology();
}

Setup prepare(const LaunchOptions& o, const std::vector<std::string>& argv, bool dry) {
  Setup s;
  if (argv.empty()) throw UsageError("missing PROGRAM (usage: nano-run [options] [--] PROGRAM [ARGS...])");
  std::string path = getenv_string("PATH");
  // Inside a Slurm allocation of several nodes (salloc, sbatch) and with no hosts named, the
  // allocation's nodes and task counts are the hosts.
  // Started once per node by srun instead: this node's part of the world, with its own ranks.
  std::optional<std::vector<HostSlots>> allocation;
  std::optional<SlurmNodePart> node_part;
  if (o.hosts.empty() && o.hostfile.empty()) {
    const Environment here = current_environment();
    node_part = slurm_node_part(here);
    if (!node_part && o.backend != LaunchBackend::kSubprocess) {
      allocation = slurm_allocation_hosts(here);
      if (allocation && allocation->size() < 2) allocation.reset();  // one node: as any machine
    }
  }
  bool wants_hosts = !o.hosts.empty() || !o.hostfile.empty() || allocation;
  s.backend = o.backend;
  if (node_part) {
    s.backend = LaunchBackend::kSubprocess;  // each node's nano-run starts its own ranks
  } else if (s.backend == LaunchBackend::kAutomatic) {
    bool have_mpirun = true;
    try {
      resolve_program(o.mpirun, path);
    } catch (const UsageError&) {
      have_mpirun = false;
    }
    if (have_mpirun) {
      s.backend = LaunchBackend::kMpi;
    } else {
      if (wants_hosts) throw UsageError(o.names.hosts + " need Open MPI's mpirun, which is not on PATH");
      s.backend = LaunchBackend::kSubprocess;
      s.notes.push_back("nano-run: mpirun not found on PATH; using the subprocess backend");
    }
  } else if (s.backend == LaunchBackend::kMpi) {
    try {
      resolve_program(o.mpirun, path);
    } catch (const UsageError&) {
      throw UsageError(o.names.backend + " mpi needs Open MPI's mpirun, which is not on PATH ('" + o.mpirun + "')");
    }
  } else if (wants_hosts) {
    throw UsageError(o.names.hosts + " need the mpi backend, not " + o.names.backend + " subprocess");
  }
  if (!o.hosts.empty()) s.hosts = parse_hosts(o.hosts);
  if (!o.hostfile.empty()) s.hosts = read_hostfile(o.hostfile);
  if (allocation) {
    s.hosts = *allocation;
    s.notes.push_back("nano-run: hosts from the Slurm allocation (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE): " +
                      format_hosts(s.hosts));
  }
  s.hosts = in_open_mpi_order(s.hosts, host_name());

  s.argv = argv;
  s.argv[0] = resolve_program(argv[0], path);
  check_runnable(s.argv[0], path);
  if (s.backend == LaunchBackend::kMpi) find_shim_executable(o);

  s.topology = load_topology(o);
  if (node_part) {
    PlanOptions po = o.plan;
    if (po.num_processes > 0) {
      if (po.num_processes % node_part->nodes != 0)
        throw UsageError(o.plan.names.num_processes + " " + std::to_string(po.num_processes) +
                         " does not divide among the " + std::to_string(node_part->nodes) +
                         " nodes of the Slurm step (each node's nano-run starts "
                         "an equal part)");
      po.num_processes /= node_part->nodes;
    }
    Plan plan = make_plan(s.topology, po);
    s.world_size = static_cast<int>(plan.ranks.size());
    s.rank_offset = node_part->node * s.world_size;
    s.world_total = s.world_size * node_part->nodes;
    s.group_index = node_part->node;
    s.groups.push_back({"", 0, s.world_size});
    s.rank_plans = plan.ranks;
    s.notes.insert(s.notes.end(), plan.notes.begin(), plan.notes.end());
    s.notes.push_back("nano-run: node " + std::to_string(node_part->node) + " of " + std::to_string(node_part->nodes) +
                      " of a Slurm step: ranks " + std::to_string(s.rank_offset) + "-" +
                      std::to_string(s.rank_offset + s.world_size - 1) + " of " + std::to_string(s.world_total) +
                      " (nodes alike: every node's nano-run plans the same number)");
  } else if (s.hosts.empty()) {
    Plan plan = make_plan(s.topology, o.plan);
    s.world_size = static_cast<int>(plan.ranks.size());
    s.groups.push_back({"", 0, s.world_size});
    s.rank_plans = plan.ranks;
    s.notes.insert(s.notes.end(), plan.notes.begin(), plan.notes.end());
  } else {
    int slots = total_slots(s.hosts);
    s.world_size = o.plan.num_processes > 0 ? o.plan.num_processes : slots;
    if (s.world_size > slots)
      throw UsageError(o.plan.names.num_processes + " " + std::to_string(s.world_size) + " is more than the " +
                       std::to_string(slots) + " slots of the hosts");
    int next = 0;
    for (const auto& h : s.hosts) {
      if (next >= s.world_size) break;
      int size = std::min(h.slots, s.world_size - next);
      s.groups.push_back({h.host, next, size});
      PlanOptions po = o.plan;
      po.num_processes = size;
      Plan plan = make_plan(s.topology, po);
      for (auto rp : plan.ranks) {
        rp.rank += next;
        s.rank_plans.push_back(rp);
      }
      next += size;
    }
    s.notes.push_back(
        "each host plans its own ranks against its own topology; shown: this "
        "machine's topology for every host");
  }
  for (int r : o.output_ranks)
    if (r >= s.world_size)
      throw UsageError(o.names.output_ranks + " " + std::to_string(r) + " is not a rank (world size " +
                       std::to_string(s.world_size) + ")");

  if (!o.master_addr.empty()) check_resolves(o.master_addr, o.names.master_addr);
  s.master_addr = !o.master_addr.empty() ? o.master_addr
                  : node_part            ? node_part->master
                  : s.hosts.empty()      ? "127.0.0.1"
                                         : s.hosts.front().host;
  if (o.master_port > 0) {
    if (!dry && s.hosts.empty() && (!node_part || node_part->node == 0)) check_port_free(o.master_port);
    s.master_port = o.master_port;
  } else if (node_part) {
    // Every node must agree without talking: a port derived from the job and step.
    s.master_port = node_part->port;
    if (!dry && node_part->node == 0) {
      try {
        check_port_free(s.master_port);
      } catch (const UsageError&) {
        throw UsageError("the rendezvous port " + std::to_string(s.master_port) +
                         " derived from the Slurm job is "
                         "busy on this node; choose one with --master-port");
      }
    }
  } else {
    s.master_port = dry ? 0 : pick_free_port();
  }

  bool planned_elsewhere = !o.topology_xml.empty() || !o.synthetic.empty();
  if (!dry && s.hosts.empty() && planned_elsewhere) {
    std::vector<int> allowed = allowed_cpus_of_this_process();
    for (const auto& rp : s.rank_plans)
      for (int c : rp.cpus)
        if (!std::binary_search(allowed.begin(), allowed.end(), c))
          throw UsageError("rank " + std::to_string(rp.rank) + "'s CPUs " + format_cpu_list(rp.cpus) +
                           " are not usable on this machine (allowed: " + format_cpu_list(allowed) +
                           "); plans for other machines are for --dry-run");
  }

  Environment current = current_environment();
  const std::string python_folder = nano_python_folder();
  for (const auto& g : s.groups) {
    for (int local = 0; local < g.size; ++local) {
      int rank = g.first_rank + local;
      RankIdentity id{s.rank_offset + rank,
                      local,
                      s.world_total > 0 ? s.world_total : s.world_size,
                      g.size,
                      s.group_index >= 0 ? s.group_index : static_cast<int>(&g - s.groups.data()),
                      node_part ? node_part->nodes : static_cast<int>(s.groups.size()),
                      s.master_addr,
                      s.master_port};
      s.envs.push_back(make_rank_environment(id, s.rank_plans[static_cast<size_t>(rank)], o.recipe, current,
                                             find_installed_library, o.extra_env, python_folder));
    }
  }
  if (!s.envs.empty()) {
    s.warning = user_kept_warning(s.envs.front().user_kept, current);
    for (const auto& w : s.envs.front().warnings)
      s.warning += (s.warning.empty() ? "" : "\n") + std::string("nano-run: warning: ") + w;
  }
  if (!dry) {
    s.job_id = make_job_id();
    // torchrun's run id names the run, not the attempt: NANO_JOB_ID is fresh on every restart
    // (each attempt's files are its own), so the run id is the first attempt's job id and stays.
    s.run_id = node_part ? node_part->run_id : s.job_id;
    const AttemptIdentity attempt = attempt_of(s, o);
    for (size_t r = 0; r < s.envs.size(); ++r)
      for (auto& [name, value] : attempt_variables(attempt, s.rank_offset + static_cast<int>(r)))
        s.envs[r].env[name] = value;
    if (s.backend == LaunchBackend::kMpi && s.hosts.empty()) s.job_dir = "/dev/shm/nano-" + s.job_id;
  }
  return s;
}

void renew_for_restart(Setup& s, const LaunchOptions& o, int restarts) {
  s.job_id = make_job_id();
  s.restart_count = restarts;
  if (!s.job_dir.empty()) s.job_dir = "/dev/shm/nano-" + s.job_id;
  if (o.master_port == 0) s.master_port = pick_free_port();
  const AttemptIdentity attempt = attempt_of(s, o);
  for (size_t r = 0; r < s.envs.size(); ++r) {
    Environment& env = s.envs[r].env;
    for (auto& [name, value] : attempt_variables(attempt, s.rank_offset + static_cast<int>(r))) env[name] = value;
    env["MASTER_PORT"] = std::to_string(s.master_port);
  }
}

}  // namespace nano
