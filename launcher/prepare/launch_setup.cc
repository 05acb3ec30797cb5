#include "launcher/prepare/launch_setup.h"

#include <netdb.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

#include <nano/error.h>
#include "core/cpulist.h"
#include "core/job_secret.h"
#include "core/rank_contract.h"
#include "launcher/prepare/job_files.h"
#include "launcher/prepare/port.h"
#include "launcher/process/self_exe.h"
#include "launcher/process/subprocess.h"
#include "launcher/source_filter/source_filter.h"
#include "launcher/timeline/timeline_merge.h"

#ifndef NANO_RUN_BUILD_PATH
#define NANO_RUN_BUILD_PATH ""
#endif
#ifndef NANO_RUN_INSTALL_PATH
#define NANO_RUN_INSTALL_PATH ""
#endif

namespace nano {
namespace {

// A name the ranks could not resolve would only show as their rendezvous timing out.
void check_resolves(const std::string& addr) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(addr.c_str(), nullptr, &hints, &found);
  if (found) freeaddrinfo(found);
  if (rc != 0)
    throw SettingError(Setting::kMasterAddr, addr, "{master_addr} " + addr + " does not resolve: " + gai_strerror(rc));
}

// The effects of choose_rendezvous's decision: check the port where rank 0 will listen, or pick
// one.
int settle_port(const Rendezvous& r, Purpose purpose) {
  if (purpose == Purpose::kDryRun) return r.port;
  if (r.choice == PortChoice::kPicked) return pick_free_port();
  if (!r.check_here) return r.port;
  const std::string unusable = port_unusable_reason(r.port);
  if (unusable.empty()) return r.port;
  const std::string port = std::to_string(r.port);
  if (r.choice == PortChoice::kDerived)
    throw SettingError(Setting::kMasterPort, port,
                       "the rendezvous port " + port + " derived from the Slurm job is " + unusable +
                           " on this node; choose one with {master_port}");
  throw SettingError(Setting::kMasterPort, port,
                     "{master_port} " + port + " " + (unusable == "busy" ? "is busy on this machine" : unusable));
}

// A plan for another machine (--topology, --synthetic) may name CPUs this one lacks: fine for
// a dry run, not for a launch.
void check_cpus_usable(const std::vector<RankPlan>& plans) {
  const std::vector<int> allowed = allowed_cpus_of_this_process();
  for (const auto& rp : plans)
    for (int c : rp.cpus)
      if (!std::binary_search(allowed.begin(), allowed.end(), c))
        throw UsageError("rank " + std::to_string(rp.rank) + "'s CPUs " + format_cpu_list(rp.cpus) +
                         " are not usable on this machine (allowed: " + format_cpu_list(allowed) +
                         "); plans for other machines are for --dry-run");
}

bool on_path(const std::string& program, const std::string& path) {
  try {
    resolve_program(program, path);
    return true;
  } catch (const UsageError&) {
    return false;
  }
}

}  // namespace

std::string getenv_string(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string find_shim_executable(const LaunchOptions& o) {
  if (!o.shim_executable.empty()) return resolve_program(o.shim_executable, getenv_string("PATH"));
  std::vector<std::string> candidates;
  candidates.push_back(getenv_string(contract::kRunPath));
  std::string self = self_executable();
  std::string dir = self.substr(0, self.rfind('/') + 1);
  if (self.size() >= 8 && self.compare(self.size() - 8, 8, "nano-run") == 0) candidates.push_back(self);
  if (!dir.empty()) candidates.push_back(dir + "nano-run");
  candidates.push_back(NANO_RUN_BUILD_PATH);
  candidates.push_back(NANO_RUN_INSTALL_PATH);
  for (const auto& c : candidates)
    if (!c.empty() && on_path(c, "")) return c;
  if (on_path("nano-run", getenv_string("PATH"))) return resolve_program("nano-run", getenv_string("PATH"));
  throw SettingError(Setting::kBackend, "mpi",
                     std::string("the mpi backend needs nano-run for its rank shim and none was found (set ") +
                         contract::kRunPath +
                         " or "
                         "use {backend} subprocess)");
}

std::string nano_python_folder() {
  const std::string folder = python_folder_for(self_executable());
  struct stat st {};
  return !folder.empty() && stat(folder.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? folder : "";
}

ListenGuard listen_guard_for(const std::vector<std::string>& hosts, const Environment& current,
                             const std::string& nano_run) {
  ListenGuard guard;
  const auto chosen = current.find(NANO_LISTEN_GUARD_VARIABLE);
  if (chosen != current.end() && chosen->second == "off") return guard;
  guard.library = listen_guard_library_for(nano_run);
  struct stat st {};
  if (guard.library.empty() || stat(guard.library.c_str(), &st) != 0)
    throw UsageError(
        "the listen guard " + (guard.library.empty() ? std::string("libnano_listen_guard.so") : guard.library) +
        " is missing: a job over several hosts, or of the mpi backend, preloads it into its processes so that "
        "their listeners admit only the job's hosts (" NANO_LISTEN_GUARD_VARIABLE "=off runs without it)");
  if (chosen != current.end() && !chosen->second.empty()) {
    uint32_t parsed[NANO_MAX_SOURCES];
    if (nano_parse_sources(chosen->second.c_str(), parsed, NANO_MAX_SOURCES) < 0)
      throw UsageError("bad " NANO_LISTEN_GUARD_VARIABLE "='" + chosen->second +
                       "': expected IPv4 addresses separated by commas, or off");
    std::string one;
    for (char c : chosen->second + ",") {
      if (c != ',') {
        one += c;
      } else if (!one.empty()) {
        guard.sources.push_back(one);
        one.clear();
      }
    }
    return guard;
  }
  std::vector<std::vector<std::string>> per_host;
  for (const auto& h : hosts) {
    per_host.push_back(ipv4_addresses_of(h));
    if (per_host.back().empty())
      throw SettingError(Setting::kHosts, h,
                         "host " + h +
                             " of {hosts} does not resolve here, so its ranks could not be admitted "
                             "by the job's listeners");
  }
  guard.sources = admitted_sources(local_ipv4_addresses(), per_host);
  if (guard.sources.size() > NANO_MAX_SOURCES)
    throw UsageError("the job's hosts have " + std::to_string(guard.sources.size()) +
                     " addresses; its listeners admit " + std::to_string(NANO_MAX_SOURCES) +
                     " at most (" NANO_LISTEN_GUARD_VARIABLE "=off runs without them)");
  return guard;
}

AttemptIdentity attempt_of(const Setup& s) {
  return {s.job_id, s.run_id, s.restart_count, s.options.max_restarts, s.secret, s.job_dir};
}

Topology load_topology(const std::string& topology_xml, const std::string& synthetic) {
  if (!topology_xml.empty()) return load_xml_topology(topology_xml);
  if (!synthetic.empty()) return load_synthetic_topology(synthetic);
  return load_machine_topology();
}

// ---- the stages ----

void check_launch_options(const LaunchOptions& o) {
  const auto at_least_zero = [](Setting setting, long long value, const std::string& unit) {
    if (value < 0)
      throw SettingError(
          setting, std::to_string(value),
          std::string("{") + setting_key(setting) + "} must be at least 0, got " + std::to_string(value) + unit);
  };
  // PlanOptions takes 0 for "not given"; a negative count is wrong on every path (the planner
  // sees it only on one machine: hosts and Slurm nodes divide the count first).
  if (o.plan.num_processes < 0) check_num_processes(o.plan.num_processes);
  at_least_zero(Setting::kMaxRestarts, o.max_restarts, "");
  at_least_zero(Setting::kGracePeriod, o.grace_period.count(), " ms");
  at_least_zero(Setting::kRestartDelay, o.restart_delay.count(), " ms");
  at_least_zero(Setting::kMinHosts, o.min_hosts, "");
  if (o.host_lost_after < 1)
    throw SettingError(Setting::kHostLostAfter, std::to_string(o.host_lost_after),
                       "{host_lost_after} must be at least 1, got " + std::to_string(o.host_lost_after));
  if (o.min_hosts > 0 && o.max_restarts < 1)
    throw SettingError(Setting::kMinHosts, std::to_string(o.min_hosts),
                       "{min_hosts} " + std::to_string(o.min_hosts) +
                           " goes on after a lost host by a restart: it needs {max_restarts} 1 or more");
  if (o.batch_policy != "per-rank" && o.batch_policy != "global")
    throw SettingError(Setting::kBatchPolicy, o.batch_policy,
                       "{batch_policy} must be per-rank or global, got '" + o.batch_policy + "'");
  if (o.rejoin && o.min_hosts == 0)
    throw SettingError(Setting::kRejoin, "",
                       "{rejoin} takes back hosts that left an elastic world: it needs {min_hosts}");
  if (o.heartbeat_timeout < std::chrono::seconds(1))
    throw SettingError(
        Setting::kHeartbeatTimeout, std::to_string(o.heartbeat_timeout.count()),
        "{heartbeat_timeout} must be at least 1 s, got " + std::to_string(o.heartbeat_timeout.count()) + " ms");
  if (!o.topology_xml.empty() && !o.synthetic.empty())
    throw SettingError(Setting::kTopology, o.topology_xml, "{topology} and {synthetic} cannot be used together");
  if (!o.hosts.empty() && !o.hostfile.empty())
    throw SettingError(Setting::kHosts, o.hosts, "{hosts} and {hostfile} cannot be used together");
  if (o.master_port < 0 || o.master_port > 65535)
    throw SettingError(Setting::kMasterPort, std::to_string(o.master_port),
                       "{master_port} " + std::to_string(o.master_port) + " is not a port number 1-65535");
}

SlurmContext slurm_context_of(const LaunchOptions& o, const Environment& env) {
  SlurmContext slurm;
  if (!o.hosts.empty() || !o.hostfile.empty()) return slurm;
  slurm.node_part = slurm_node_part(env);
  if (!slurm.node_part && o.backend != LaunchBackend::kSubprocess) {
    slurm.allocation = slurm_allocation_hosts(env);
    if (slurm.allocation && slurm.allocation->size() < 2) slurm.allocation.reset();  // one node: as any machine
  }
  return slurm;
}

LaunchBackend choose_backend(const LaunchOptions& o, const SlurmContext& slurm, bool have_mpirun) {
  if (slurm.node_part) return LaunchBackend::kSubprocess;  // each node's nano-run starts its own ranks
  const bool wants_hosts = !o.hosts.empty() || !o.hostfile.empty() || slurm.allocation;
  // The hosts' setting as the user gave it (a Slurm allocation has none: it needs mpi like them).
  const Setting hosts = !o.hostfile.empty() ? Setting::kHostfile : Setting::kHosts;
  const std::string hosts_placeholder = std::string("{") + setting_key(hosts) + "}";
  switch (o.backend) {
    case LaunchBackend::kMpi:
      if (!have_mpirun)
        throw SettingError(Setting::kBackend, "mpi",
                           "{backend} mpi needs Open MPI's mpirun, which is not on PATH ('" + o.mpirun + "')");
      return LaunchBackend::kMpi;
    case LaunchBackend::kSubprocess:
      if (wants_hosts)
        throw SettingError(hosts, "", hosts_placeholder + " needs the mpi backend, not {backend} subprocess");
      return LaunchBackend::kSubprocess;
    case LaunchBackend::kAutomatic: break;
  }
  // One host: ranks forked by nano-run itself, so the job listens on nothing. mpirun's daemon
  // binds every interface, and Open MPI's shared-memory path is no faster than nano's own
  // (docs/benchmarks.md, "One host: subprocess or mpi"): mpi on one host only when asked for.
  if (!wants_hosts) return LaunchBackend::kSubprocess;
  if (have_mpirun) return LaunchBackend::kMpi;
  if (slurm.allocation)
    throw UsageError("the hosts of the Slurm allocation need Open MPI's mpirun, which is not on PATH");
  throw SettingError(hosts, "", hosts_placeholder + " needs Open MPI's mpirun, which is not on PATH");
}

std::vector<HostSlots> resolve_hosts(const LaunchOptions& o, const SlurmContext& slurm,
                                     std::vector<std::string>& notes) {
  std::vector<HostSlots> hosts;
  if (!o.hosts.empty()) hosts = parse_hosts(o.hosts);
  if (!o.hostfile.empty()) hosts = read_hostfile(o.hostfile);
  if (slurm.allocation) {
    hosts = *slurm.allocation;
    notes.push_back("nano-run: hosts from the Slurm allocation (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE): " +
                    format_hosts(hosts));
  }
  return in_open_mpi_order(hosts, host_name());
}

void check_elastic_hosts(const LaunchOptions& o, const std::vector<HostSlots>& hosts) {
  if (o.min_hosts == 0) return;
  const std::string min = std::to_string(o.min_hosts);
  if (hosts.empty())
    throw SettingError(Setting::kMinHosts, min,
                       "{min_hosts} " + min + " needs several hosts ({hosts}, {hostfile} or a Slurm allocation)");
  if (o.min_hosts > static_cast<int>(hosts.size()))
    throw SettingError(Setting::kMinHosts, min,
                       "{min_hosts} " + min + " is more than the " + std::to_string(hosts.size()) + " hosts");
  const int slots = total_slots(hosts);
  if (o.plan.num_processes > 0 && o.plan.num_processes != slots)
    throw SettingError(Setting::kNumProcesses, std::to_string(o.plan.num_processes),
                       "{num_processes} " + std::to_string(o.plan.num_processes) +
                           " with {min_hosts}: an elastic world " + "takes every slot of the hosts it runs on, " +
                           std::to_string(slots) + " here");
}

Plan plan_host_ranks(const Topology& topology, PlanOptions plan, int ranks) {
  plan.num_processes = ranks;
  return make_plan(topology, plan);
}

namespace {

// A Slurm node part's share of the world: every node's nano-run plans the same number.
WorldPlan plan_node_part(const Topology& topology, const PlanOptions& plan, const SlurmNodePart& part) {
  const int asked = plan.num_processes;
  if (asked > 0 && asked % part.nodes != 0)
    throw SettingError(Setting::kNumProcesses, std::to_string(asked),
                       "{num_processes} " + std::to_string(asked) + " does not divide among the " +
                           std::to_string(part.nodes) +
                           " nodes of the Slurm step (each node's nano-run starts an equal part)");
  const Plan mine = plan_host_ranks(topology, plan, asked > 0 ? asked / part.nodes : 0);
  WorldPlan w;
  w.world_size = static_cast<int>(mine.ranks.size());
  w.rank_offset = part.node * w.world_size;
  w.world_total = w.world_size * part.nodes;
  w.group_index = part.node;
  w.group_count = part.nodes;
  w.groups.push_back({"", 0, w.world_size, true});  // each node's nano-run launches its own part
  w.rank_plans = mine.ranks;
  w.notes = mine.notes;
  w.notes.push_back("nano-run: node " + std::to_string(part.node) + " of " + std::to_string(part.nodes) +
                    " of a Slurm step: ranks " + std::to_string(w.rank_offset) + "-" +
                    std::to_string(w.rank_offset + w.world_size - 1) + " of " + std::to_string(w.world_total) +
                    " (nodes alike: every node's nano-run plans the same number)");
  return w;
}

// The hosts' slots in order, each host planned on its own (here against this machine).
WorldPlan plan_hosts(const Topology& topology, const PlanOptions& plan, const std::vector<HostSlots>& hosts,
                     const std::string& this_host) {
  WorldPlan w;
  const int slots = total_slots(hosts);
  w.world_size = plan.num_processes > 0 ? plan.num_processes : slots;
  if (w.world_size > slots)
    throw SettingError(Setting::kNumProcesses, std::to_string(w.world_size),
                       "{num_processes} " + std::to_string(w.world_size) + " is more than the " +
                           std::to_string(slots) + " slots of the hosts");
  for (const auto& h : hosts) {
    const int next = w.groups.empty() ? 0 : w.groups.back().first_rank + w.groups.back().size;
    if (next >= w.world_size) break;
    const int size = std::min(h.slots, w.world_size - next);
    w.groups.push_back({h.host, next, size, is_launch_host(h.host, this_host)});
    for (RankPlan rp : plan_host_ranks(topology, plan, size).ranks) {
      rp.rank += next;
      w.rank_plans.push_back(rp);
    }
  }
  w.group_count = static_cast<int>(w.groups.size());
  w.notes.push_back(
      "each host plans its own ranks against its own topology; shown: this "
      "machine's topology for every host");
  return w;
}

}  // namespace

bool is_launch_host(const std::string& host, const std::string& this_host) {
  // resolve_hosts's match (the name that puts this host first), and the names Open MPI takes
  // for this host whatever its name.
  return host.empty() || host == this_host || host == "localhost" || host == "127.0.0.1";
}

WorldPlan plan_world(const Topology& topology, const LaunchOptions& o, const std::vector<HostSlots>& hosts,
                     const SlurmContext& slurm, const std::string& this_host) {
  WorldPlan w;
  if (slurm.node_part) {
    w = plan_node_part(topology, o.plan, *slurm.node_part);
  } else if (!hosts.empty()) {
    w = plan_hosts(topology, o.plan, hosts, this_host);
  } else {
    const Plan plan = make_plan(topology, o.plan);
    w.world_size = static_cast<int>(plan.ranks.size());
    w.groups.push_back({"", 0, w.world_size, true});
    w.rank_plans = plan.ranks;
    w.notes = plan.notes;
  }
  for (int r : o.output_ranks)
    if (r >= w.world_size)
      throw SettingError(
          Setting::kOutputRanks, std::to_string(r),
          "{output_ranks} " + std::to_string(r) + " is not a rank (world size " + std::to_string(w.world_size) + ")");
  return w;
}

Rendezvous choose_rendezvous(const LaunchOptions& o, const std::vector<HostSlots>& hosts, const SlurmContext& slurm) {
  Rendezvous r;
  r.addr = !o.master_addr.empty() ? o.master_addr
           : slurm.node_part      ? slurm.node_part->master
           : hosts.empty()        ? "127.0.0.1"
                                  : hosts.front().host;
  // Rank 0 listens on this host when the job has one host, or this is the Slurm step's node 0;
  // on a job over several hosts rank 0's shim checks the port where it listens.
  const bool rank0_here = slurm.node_part ? slurm.node_part->node == 0 : hosts.empty();
  if (o.master_port > 0) {
    r.choice = PortChoice::kGiven;
    r.port = o.master_port;
    r.check_here = rank0_here;
  } else if (slurm.node_part) {
    // Every node must agree without talking: a port derived from the job and step.
    r.choice = PortChoice::kDerived;
    r.port = slurm.node_part->port;
    r.check_here = rank0_here;
  }
  return r;
}

std::vector<RankEnvironment> make_rank_environments(const WorldPlan& world, const Rendezvous& rendezvous,
                                                    const EnvironmentInputs& inputs) {
  std::vector<RankEnvironment> envs;
  for (const auto& g : world.groups) {
    for (int local = 0; local < g.size; ++local) {
      const int rank = g.first_rank + local;
      RankIdentity id;
      id.rank = world.rank_offset + rank;
      id.local_rank = local;
      id.world_size = world.world_total > 0 ? world.world_total : world.world_size;
      id.local_world_size = g.size;
      id.group_rank = world.group_index >= 0 ? world.group_index : static_cast<int>(&g - world.groups.data());
      id.group_world_size = world.group_count;
      id.master_addr = rendezvous.addr;
      id.master_port = rendezvous.port;
      envs.push_back(make_rank_environment(id, world.rank_plans[static_cast<size_t>(rank)], *inputs.recipe,
                                           *inputs.current, inputs.finder, *inputs.extra_env, inputs.python_folder));
      Environment& env = envs.back().env;
      add_listen_guard(env, inputs.listen_guard);
      // Over whatever the environment brought along (a launch from inside another job's rank).
      env[contract::kLaunchHost] = g.launch_host ? "1" : "0";
      env.erase(contract::kJobDir);
    }
  }
  return envs;
}

bool needs_listen_guard(const Setup& s) {
  // On one host, mpirun (Open MPI 4.1's orte, 5's prte and PMIx server) binds its daemon channel
  // to every address with no setting to narrow it: guarded, it admits this host's own addresses
  // only, so nothing of a one-host job can be reached from another machine.
  return !s.hosts.empty() || s.group_index >= 0 || s.backend == LaunchBackend::kMpi;
}

void stamp_attempt(Setup& s, const AttemptIdentity& attempt) {
  s.job_id = attempt.job_id;
  s.run_id = attempt.run_id;
  s.secret = attempt.secret;
  s.restart_count = attempt.restart_count;
  if (s.hosts.empty()) s.job_dir = job_dir_of(s.job_id);
  if (s.backend == LaunchBackend::kMpi && !s.hosts.empty()) s.session_dir = hosts_session_dir_of(s.job_id);
  AttemptIdentity here = attempt;
  here.job_dir = s.job_dir;  // the ranks' folders go inside it
  for (size_t r = 0; r < s.envs.size(); ++r) {
    Environment& env = s.envs[r].env;
    for (auto& [name, value] : attempt_variables(here, s.rank_offset + static_cast<int>(r))) env[name] = value;
    env["MASTER_PORT"] = std::to_string(s.master_port);
    if (!s.job_dir.empty())
      env[contract::kJobDir] = s.job_dir;
    else
      env.erase(contract::kJobDir);
  }
}

// ---- the shell ----

Setup prepare(const LaunchOptions& o, const std::vector<std::string>& argv, Purpose purpose) {
  if (argv.empty()) throw UsageError("missing PROGRAM (usage: nano-run [options] [--] PROGRAM [ARGS...])");
  check_launch_options(o);
  const std::string path = getenv_string("PATH");
  const Environment current = current_environment();
  Setup s;
  s.options = o;
  s.purpose = purpose;
  const SlurmContext slurm = slurm_context_of(o, current);
  s.backend = choose_backend(o, slurm, on_path(o.mpirun, path));
  s.hosts = resolve_hosts(o, slurm, s.notes);
  check_elastic_hosts(o, s.hosts);

  s.argv = argv;
  s.argv[0] = resolve_program(argv[0], path);
  check_runnable(s.argv[0], path);
  if (s.backend == LaunchBackend::kMpi) find_shim_executable(o);

  s.topology = load_topology(o.topology_xml, o.synthetic);
  WorldPlan world = plan_world(s.topology, o, s.hosts, slurm, host_name());
  s.groups = world.groups;
  s.world_size = world.world_size;
  s.rank_plans = world.rank_plans;
  s.rank_offset = world.rank_offset;
  s.world_total = world.world_total;
  s.group_index = world.group_index;
  s.notes.insert(s.notes.end(), world.notes.begin(), world.notes.end());

  if (!o.master_addr.empty()) check_resolves(o.master_addr);
  Rendezvous rendezvous = choose_rendezvous(o, s.hosts, slurm);
  rendezvous.port = settle_port(rendezvous, purpose);
  s.master_addr = rendezvous.addr;
  s.master_port = rendezvous.port;
  s.port_choice = rendezvous.choice;

  const bool planned_elsewhere = !o.topology_xml.empty() || !o.synthetic.empty();
  if (purpose == Purpose::kLaunch && s.hosts.empty() && planned_elsewhere) check_cpus_usable(s.rank_plans);

  EnvironmentInputs inputs;
  inputs.recipe = &o.recipe;
  inputs.current = &current;
  inputs.finder = find_installed_library;
  // The ranks' records of a timeline go to its folder (launcher/timeline/timeline_merge.h).
  if (!o.timeline.empty()) s.options.extra_env[contract::kTimeline] = timeline_records_folder(o.timeline);
  // Rejoin: nano's checkpoints stop the world at a checkpoint when a host comes back.
  if (o.rejoin) s.options.extra_env[contract::kStopAtCheckpoint] = "1";
  // The first world's size, kept by every later world (prepare_on_hosts copies these options).
  if (o.batch_policy == "global" && !s.options.extra_env.count(contract::kBatchWorldSize))
    s.options.extra_env[contract::kBatchWorldSize] =
        std::to_string(world.world_total > 0 ? world.world_total : world.world_size);
  inputs.extra_env = &s.options.extra_env;
  inputs.python_folder = nano_python_folder();
  if (purpose == Purpose::kLaunch && needs_listen_guard(s)) {
    std::vector<std::string> names;
    for (const auto& h : s.hosts) names.push_back(h.host);
    if (slurm.node_part) names = slurm.node_part->step_nodes;
    // Beside the nano-run that runs the shims: a program's own launch (TorchNano) is not nano-run.
    const std::string nano_run = s.backend == LaunchBackend::kMpi ? find_shim_executable(o) : self_executable();
    s.listen_guard = listen_guard_for(names, current, nano_run);
    check_listen_guard(s.listen_guard);  // what the guard would refuse every listener for
    inputs.listen_guard = s.listen_guard;
  }
  s.envs = make_rank_environments(world, rendezvous, inputs);
  if (!s.envs.empty()) {
    s.warning = user_kept_warning(s.envs.front().user_kept, current);
    for (const auto& w : s.envs.front().warnings)
      s.warning += (s.warning.empty() ? "" : "\n") + std::string("nano-run: warning: ") + w;
  }
  if (purpose == Purpose::kLaunch) {
    const std::string job_id = make_job_id();
    // torchrun's run id names the run, not the attempt: NANO_JOB_ID is fresh on every restart
    // (each attempt's files are its own), so the run id is the first attempt's job id and stays.
    // The nodes of a Slurm step share no channel nano-run could hand a secret through: there the
    // secret is the one the user exported for every node (srun passes the environment on), if any.
    const std::string secret = slurm.node_part ? getenv_string(kJobSecretVariable) : make_job_secret();
    stamp_attempt(s, {job_id, slurm.node_part ? slurm.node_part->run_id : job_id, 0, o.max_restarts, secret});
  }
  return s;
}

void renew_for_restart(Setup& s, int restarts) {
  // A picked port may linger in TIME_WAIT; a given one is the user's, and a Slurm node part's is
  // derived alike on every node, which a port picked here on one node would break.
  if (s.port_choice == PortChoice::kPicked) s.master_port = pick_free_port();
  const bool slurm_node_part = s.group_index >= 0;  // its nodes restart alike, with the secret they share
  stamp_attempt(
      s, {make_job_id(), s.run_id, restarts, s.options.max_restarts, slurm_node_part ? s.secret : make_job_secret()});
}

Setup prepare_on_hosts(const Setup& s, const std::vector<HostSlots>& hosts, int restarts) {
  LaunchOptions o = s.options;
  o.hosts = format_hosts(hosts);
  o.hostfile.clear();  // the hosts left, named (a hostfile's or an allocation's as much)
  o.plan.num_processes = total_slots(hosts);
  // The ranks shown that the smaller world still has.
  o.output_ranks.erase(
      std::remove_if(o.output_ranks.begin(), o.output_ranks.end(), [&](int r) { return r >= o.plan.num_processes; }),
      o.output_ranks.end());
  Setup next = prepare(o, s.argv, Purpose::kLaunch);
  next.notes.clear();  // told at the first attempt
  next.warning.clear();
  stamp_attempt(next, {next.job_id, s.run_id, restarts, o.max_restarts, next.secret});
  return next;
}

}  // namespace nano
