#include "cli/launcher.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <random>
#include <set>
#include <sstream>

#include "cli/guardian.h"

#include "cli/carried_env.h"
#include "cli/frames.h"
#include "cli/hosts.h"
#include "cli/mpi_command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/port.h"
#include "cli/rank_env.h"
#include "cli/signals.h"
#include "cli/slurm.h"
#include "cli/subprocess.h"
#include "cli/supervisor.h"
#include "env-init/cpulist.h"
#include "env-init/error.h"
#include "env-init/topology.h"

#ifndef NANO_RUN_BUILD_PATH
#define NANO_RUN_BUILD_PATH ""
#endif
#ifndef NANO_RUN_INSTALL_PATH
#define NANO_RUN_INSTALL_PATH ""
#endif

namespace nano {
namespace {

using Clock = std::chrono::steady_clock;

std::string getenv_string(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool is_executable_file(const std::string& path) {
  try {
    resolve_program(path, "");
    return true;
  } catch (const UsageError&) {
    return false;
  }
}

std::string self_executable() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
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

std::string signal_name(int sig) {
  switch (sig) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    default: return "signal " + std::to_string(sig);
  }
}

// One group of ranks on one host.
struct HostGroup {
  std::string host;  // "" = this machine
  int first_rank = 0;
  int size = 0;
};

// Every decision of a launch, made before anything starts.
struct Setup {
  Backend backend = Backend::subprocess;
  std::vector<std::string> argv;  // argv[0] resolved
  std::vector<HostSlots> hosts;
  std::vector<HostGroup> groups;
  int world_size = 0;
  Topology topology;
  std::vector<RankPlan> rank_plans;  // global rank order
  std::vector<RankEnvironment> envs;
  std::string master_addr;
  int master_port = 0;
  std::vector<std::string> notes;
  std::string warning;  // the user_kept warning, printed once
  // This launch's name for what it leaves in /dev/shm: ranks name nano's shared memory
  // "nano-<job_id>-...", and on one host Open MPI puts its shared-memory files and session
  // directory in job_dir, so the launcher (or its guardian) removes them on every way out.
  std::string job_id;
  std::string job_dir;  // "" = none (dry run, several hosts)
  // One node's part of a world started per node (srun): these ranks are rank_offset.. of
  // world_total, on host group_index; 0 / 0 / -1 otherwise.
  int rank_offset = 0;
  int world_total = 0;
  int group_index = -1;
};

std::string make_job_id() {
  std::random_device rd;
  char text[16];
  snprintf(text, sizeof text, "%06x", rd() & 0xffffff);
  return std::to_string(getpid()) + "-" + text;
}

Topology load_topology(const LaunchOptions& o) {
  if (!o.topology_xml.empty()) return load_xml_topology(o.topology_xml);
  if (!o.synthetic.empty()) return load_synthetic_topology(o.synthetic);
  return load_machine_topology();
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
void check_resolves(const std::string& addr) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(addr.c_str(), nullptr, &hints, &found);
  if (found) freeaddrinfo(found);
  if (rc != 0) throw UsageError("--master-addr " + addr + " does not resolve: " + gai_strerror(rc));
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
    if (!node_part && o.backend != Backend::subprocess) {
      allocation = slurm_allocation_hosts(here);
      if (allocation && allocation->size() < 2) allocation.reset();  // one node: as any machine
    }
  }
  bool wants_hosts = !o.hosts.empty() || !o.hostfile.empty() || allocation;
  s.backend = o.backend;
  if (node_part) {
    s.backend = Backend::subprocess;  // each node's nano-run starts its own ranks
  } else if (s.backend == Backend::automatic) {
    bool have_mpirun = true;
    try {
      resolve_program(o.mpirun, path);
    } catch (const UsageError&) {
      have_mpirun = false;
    }
    if (have_mpirun) {
      s.backend = Backend::mpi;
    } else {
      if (wants_hosts)
        throw UsageError("--hosts and --hostfile need Open MPI's mpirun, which is not on PATH");
      s.backend = Backend::subprocess;
      s.notes.push_back("nano-run: mpirun not found on PATH; using the subprocess backend");
    }
  } else if (s.backend == Backend::mpi) {
    try {
      resolve_program(o.mpirun, path);
    } catch (const UsageError&) {
      throw UsageError("--backend mpi needs Open MPI's mpirun, which is not on PATH ('" + o.mpirun + "')");
    }
  } else if (wants_hosts) {
    throw UsageError("--hosts and --hostfile need the mpi backend, not --backend subprocess");
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
  if (s.backend == Backend::mpi) find_shim_executable(o);

  s.topology = load_topology(o);
  if (node_part) {
    PlanOptions po = o.plan;
    if (po.num_processes > 0) {
      if (po.num_processes % node_part->nodes != 0)
        throw UsageError("--num-processes " + std::to_string(po.num_processes) + " does not divide among the " +
                         std::to_string(node_part->nodes) + " nodes of the Slurm step (each node's nano-run starts "
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
      throw UsageError("--num-processes " + std::to_string(s.world_size) + " is more than the " +
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
    s.notes.push_back("each host plans its own ranks against its own topology; shown: this "
                      "machine's topology for every host");
  }
  for (int r : o.output_ranks)
    if (r >= s.world_size)
      throw UsageError("--output-ranks " + std::to_string(r) + " is not a rank (world size " +
                       std::to_string(s.world_size) + ")");

  if (!o.master_addr.empty()) check_resolves(o.master_addr);
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
        throw UsageError("the rendezvous port " + std::to_string(s.master_port) + " derived from the Slurm job is "
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
  for (const auto& g : s.groups) {
    for (int local = 0; local < g.size; ++local) {
      int rank = g.first_rank + local;
      RankIdentity id{s.rank_offset + rank, local, s.world_total > 0 ? s.world_total : s.world_size, g.size,
                      s.group_index >= 0 ? s.group_index : static_cast<int>(&g - s.groups.data()), s.master_addr,
                      s.master_port};
      s.envs.push_back(make_rank_environment(id, s.rank_plans[static_cast<size_t>(rank)], o.recipe,
                                             current, find_installed_library, o.extra_env));
    }
  }
  if (!s.envs.empty()) {
    s.warning = user_kept_warning(s.envs.front().user_kept, current);
    for (const auto& w : s.envs.front().warnings)
      s.warning += (s.warning.empty() ? "" : "\n") + std::string("nano-run: warning: ") + w;
  }
  if (!dry) {
    s.job_id = make_job_id();
    for (auto& e : s.envs) {
      e.env["NANO_JOB_ID"] = s.job_id;
      e.env["NANO_RESTART_COUNT"] = "0";
    }
    if (s.backend == Backend::mpi && s.hosts.empty()) s.job_dir = "/dev/shm/nano-" + s.job_id;
  }
  return s;
}

// Open MPI settings of a one-host job (job_dir set), each unless the user chose otherwise:
// - its files go to the job's own directory: the shared-memory transport's segments (btl vader
//   in Open MPI 4, btl sm in 5), the shared windows (osc sm) and the session directory (orte in
//   4, prte in 5). Names unknown to the running version are ignored by it.
// - no TCP transport: ranks of one host talk through shared memory, and Open MPI 5's TCP
//   transport prints "Unable to find reachable pairing between local and remote interfaces"
//   once per rank on hosts whose interfaces it cannot pair.
void add_one_host_open_mpi_settings(const std::string& job_dir, Environment& env) {
  if (job_dir.empty()) return;
  for (const char* name : {"OMPI_MCA_btl_vader_backing_directory", "OMPI_MCA_btl_sm_backing_directory",
                           "OMPI_MCA_osc_sm_backing_directory", "OMPI_MCA_orte_tmpdir_base",
                           "PRTE_MCA_prte_tmpdir_base"})
    env.emplace(name, job_dir);
  env.emplace("OMPI_MCA_btl", "^tcp");
}

std::vector<std::string> mpi_command_for(const LaunchOptions& o, const Setup& s, const ShimLink& link) {
  MpiCommandInput in;
  in.mpirun = resolve_program(o.mpirun, getenv_string("PATH"));
  in.num_processes = s.world_size;
  in.hosts = s.hosts;
  in.as_root = geteuid() == 0;
  // Each shim builds its rank's environment from its own (on another host: a login's) with
  // these over it. Through the shims' arguments, not mpirun's -x, which would clash with a
  // user's own Open MPI mca_base_env_list.
  ShimLink with_env = link;
  with_env.env = carried_environment(current_environment(), o.extra_env);
  if (!s.job_id.empty()) {  // this attempt's names
    with_env.env["NANO_JOB_ID"] = s.job_id;
    with_env.env["NANO_RESTART_COUNT"] = s.envs.front().env.at("NANO_RESTART_COUNT");
  }
  LaunchOptions shim_options = o;
  shim_options.master_addr = s.master_addr;
  shim_options.master_port = s.master_port;
  in.shim.push_back(find_shim_executable(o));
  auto args = shim_arguments(shim_options, with_env);
  in.shim.insert(in.shim.end(), args.begin(), args.end());
  in.program = s.argv;
  return make_mpi_command(in);
}

// ---- supervision ---------------------------------------------------------------------------

struct Channel {
  int fd = -1;
  int rank = -1;              // for pipes: the rank (kMpirunStream for mpirun); shims: after hello
  Stream stream = Stream::out;
  bool shim = false;          // a framed connection from a rank shim
  bool hello = false;
  FrameDecoder decoder;
};

class Run {
 public:
  Run(const LaunchOptions& o, const Setup& s, OutputRouter& router, StdioSink& sink, Guardian& guardian)
      : o_(o), s_(s), router_(router), sink_(sink), guardian_(guardian), supervisor_(s.world_size),
        hosts_(static_cast<size_t>(s.world_size), host_name()),
        shims_(static_cast<size_t>(s.world_size), nullptr),
        rank_groups_(static_cast<size_t>(s.world_size), -1),
        heard_(static_cast<size_t>(s.world_size)),
        lost_(static_cast<size_t>(s.world_size)) {}

  LaunchResult subprocess() {
    SignalPipe signals({SIGINT, SIGTERM, SIGHUP, SIGCHLD});
    signals_ = &signals;
    std::vector<std::string> warnings;
    bool bind_memory = s_.topology.numa_nodes.size() > 1;
    for (int r = 0; r < s_.world_size; ++r) {
      SpawnRequest req;
      req.argv = s_.argv;
      req.env = environment_strings(s_.envs[static_cast<size_t>(r)].env);
      req.cpus = s_.rank_plans[static_cast<size_t>(r)].cpus;
      if (bind_memory) req.numa_nodes = s_.rank_plans[static_cast<size_t>(r)].numa_nodes;
      Spawned sp;
      try {
        sp = spawn_process(req);
      } catch (const Error&) {
        kill_all(SIGKILL);
        reap_all_blocking();
        throw;
      }
      for (auto& w : sp.warnings)
        if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
      children_.push_back({sp.pid, r, true});
      guardian_.watch_group(sp.pid);
      add_pipe(sp.stdout_fd, r, Stream::out);
      add_pipe(sp.stderr_fd, r, Stream::err);
    }
    for (auto& w : warnings) router_.note("nano-run: warning: " + w);
    loop();
    for (auto& c : children_) killpg(c.pid, SIGKILL);  // leftovers of a rank's group (daemons)
    return finish();
  }

  LaunchResult mpi() {
    SignalPipe signals({SIGINT, SIGTERM, SIGHUP, SIGCHLD});
    signals_ = &signals;
    int port = 0;
    listen_fd_ = listen_on_free_port(!s_.hosts.empty(), port);
    std::random_device rd;
    token_ = std::to_string(rd()) + std::to_string(rd());
    ShimLink link;
    link.launcher = (s_.hosts.empty() ? std::string("127.0.0.1") : host_name()) + ":" + std::to_string(port);
    link.token = token_;
    for (const auto& g : s_.groups) link.group_starts.push_back(g.first_rank);
    SpawnRequest req;
    req.argv = mpi_command_for(o_, s_, link);
    Environment env = current_environment();
    add_one_host_open_mpi_settings(s_.job_dir, env);
    req.env = environment_strings(env);
    Spawned sp;
    try {
      sp = spawn_process(req);
    } catch (...) {
      close(listen_fd_);
      throw;
    }
    guardian_.watch_group(sp.pid);
    mpirun_pid_ = sp.pid;
    children_.push_back({sp.pid, -1, true});
    add_pipe(sp.stdout_fd, kMpirunStream, Stream::out);
    add_pipe(sp.stderr_fd, kMpirunStream, Stream::err);
    loop();
    close(listen_fd_);
    for (pid_t g : rank_groups_)
      if (g > 0) killpg(g, SIGKILL);  // leftovers of a rank's group (daemons)
    killpg(mpirun_pid_, SIGKILL);
    return finish();
  }

 private:
  struct Child {
    pid_t pid;
    int rank;  // -1 = mpirun
    bool running;
  };

  void add_pipe(int fd, int rank, Stream stream) {
    auto c = std::make_unique<Channel>();
    c->fd = fd;
    c->rank = rank;
    c->stream = stream;
    channels_.push_back(std::move(c));
  }

  void kill_all(int sig) {
    for (auto& c : children_)
      if (c.running) killpg(c.pid, sig);
  }

  // Sends `frame` to rank's shim; never blocks and never raises SIGPIPE.
  void send_to_shim(int rank, const std::string& frame) {
    Channel* ch = shims_[static_cast<size_t>(rank)];
    if (ch) {
      ssize_t ignored = send(ch->fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      (void)ignored;
    }
  }

  // Delivers `sig` to every rank still running: the subprocess backend signals each rank's
  // process group itself; the mpi backend asks each rank's shim to (mpirun is left alone,
  // since its own teardown ignores the grace period). A stopped rank is continued after a
  // SIGTERM/SIGINT/SIGHUP, so it can act on it.
  void deliver(int sig) {
    const bool cont = sig != SIGKILL && sig != SIGCONT;
    if (s_.backend != Backend::mpi) {
      kill_all(sig);
      if (cont) kill_all(SIGCONT);
      return;
    }
    teardown_signal_ = sig;
    bool all_linked = true;
    for (int r = 0; r < s_.world_size; ++r) {
      if (supervisor_.exited(r)) continue;
      if (!shims_[static_cast<size_t>(r)]) all_linked = false;
      send_to_shim(r, encode_frame(FrameType::signal, std::to_string(sig)));
    }
    // Shims that never reached us (still starting, or mpirun cannot start them) are mpirun's.
    if (!all_linked && sig == SIGKILL && mpirun_pid_ > 0) killpg(mpirun_pid_, SIGKILL);
  }

  // Every rank has ended: the shims may exit now, and mpirun with them.
  void release_shims() {
    if (released_) return;
    released_ = true;
    router_.hide(kMpirunStream);  // its words on ranks it saw end are nano-run's to tell
    for (int r = 0; r < s_.world_size; ++r) send_to_shim(r, encode_frame(FrameType::release, ""));
    // mpirun waits for a lost host's daemon it can no longer reach: give it less time.
    const bool host_lost = std::any_of(lost_.begin(), lost_.end(), [](const std::string& why) { return !why.empty(); });
    mpirun_deadline_ = Clock::now() + std::chrono::seconds(host_lost ? 2 : 10);
  }

  void reap_all_blocking() {
    for (auto& c : children_) {
      if (!c.running) continue;
      int status;
      while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
      }
      c.running = false;
    }
  }

  void apply(const Decision& d) {
    if (d.kind == Decision::signal_all) {
      deliver(d.signal);
      if (d.start_grace) deadline_ = Clock::now() + o_.grace_period;
    } else if (d.kind == Decision::kill_all) {
      deliver(SIGKILL);
      deadline_.reset();
      // Shims that do not confirm their rank's end by then are taken down with mpirun.
      if (mpirun_pid_ > 0) mpirun_deadline_ = Clock::now() + std::chrono::seconds(5);
    }
    if (s_.backend == Backend::mpi && supervisor_.all_exited()) release_shims();
  }

  void rank_ended(int rank, int code, int sig) {
    bool first_failure = !supervisor_.root_cause() && !supervisor_.tearing_down() &&
                         supervisor_.interrupted_by() == 0 && (code != 0 || sig != 0);
    if (first_failure) {
      const std::string what = lost_[static_cast<size_t>(rank)].empty()
                                   ? "rank " + std::to_string(rank + s_.rank_offset) + " " + describe_end(code, sig)
                                   : describe_lost(rank);
      router_.note("nano-run: " + what + "; stopping the other ranks");
    }
    apply(supervisor_.rank_exited(rank, code, sig));
  }

  // "host hostB lost (ranks 1,3 there; rank 1: <why>)"; on this host, which is not lost:
  // "rank 0's shim on hostA ended without the rank's status (<why>)".
  std::string describe_lost(int rank) const {
    const std::string& host = hosts_[static_cast<size_t>(rank)];
    if (host == host_name()) {
      return "rank " + std::to_string(rank) + "'s shim on " + host + " ended without the rank's status (" +
             lost_[static_cast<size_t>(rank)] + ")";
    }
    std::string there;
    for (int r = 0; r < s_.world_size; ++r) {
      if (hosts_[static_cast<size_t>(r)] == host) there += (there.empty() ? "" : ",") + std::to_string(r);
    }
    return "host " + host + " lost (rank" + (there.find(',') == std::string::npos ? " " : "s ") + there +
           " there; rank " + std::to_string(rank) + ": " + lost_[static_cast<size_t>(rank)] + ")";
  }

  // A rank whose shim went away without its final status, or fell silent: its host (or the
  // link to it) is gone. It counts as ended with kLostHostExitCode; nothing more comes from it.
  void lose_rank(int rank, const std::string& why) {
    const auto r = static_cast<size_t>(rank);
    if (supervisor_.exited(rank) || !lost_[r].empty()) return;
    lost_[r] = why;
    shims_[r] = nullptr;
    router_.finish(rank, Stream::out);
    router_.finish(rank, Stream::err);
    rank_ended(rank, kLostHostExitCode, 0);
  }

  // Every linked rank not heard from for `silence` counts as lost with its host.
  void lose_silent_hosts(std::chrono::milliseconds silence) {
    const auto now = Clock::now();
    for (int r = 0; r < s_.world_size; ++r) {
      const auto i = static_cast<size_t>(r);
      if (shims_[i] && !supervisor_.exited(r) && now - heard_[i] > silence) {
        const long long seconds = std::chrono::duration_cast<std::chrono::seconds>(now - heard_[i]).count();
        lose_rank(r, "no word from its shim for " + std::to_string(seconds) + " s: a cut link or a dead host");
      }
    }
  }

  // Heartbeats out to every linked shim, and the silent ones declared lost.
  void heartbeat() {
    if (s_.backend != Backend::mpi) return;
    const auto now = Clock::now();
    if (now - last_beat_ >= o_.heartbeat_timeout / 4) {
      last_beat_ = now;
      for (int r = 0; r < s_.world_size; ++r) send_to_shim(r, encode_frame(FrameType::heartbeat, ""));
    }
    lose_silent_hosts(o_.heartbeat_timeout);
  }

  static std::string describe_end(int code, int sig) {
    if (sig != 0) return "was killed by " + signal_name(sig);
    return "exited with code " + std::to_string(code);
  }

  // Returns true when the channel reached EOF.
  bool read_channel(Channel& ch) {
    char buf[65536];
    ssize_t n = read(ch.fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return false;
    if (n <= 0) {
      if (!ch.shim) router_.finish(ch.rank, ch.stream);
      else if (ch.hello) {
        router_.finish(ch.rank, Stream::out);
        router_.finish(ch.rank, Stream::err);
      }
      return true;
    }
    if (!ch.shim) {
      router_.feed(ch.rank, ch.stream, buf, static_cast<size_t>(n));
      return false;
    }
    try {
      ch.decoder.feed(buf, static_cast<size_t>(n));
      FrameType type;
      std::string payload;
      while (ch.decoder.next(type, payload)) {
        if (ch.hello) heard_[static_cast<size_t>(ch.rank)] = Clock::now();
        if (!ch.hello) {
          std::string token, host;
          int rank = -1;
          if (type != FrameType::hello || !parse_hello(payload, token, rank, host) || token != token_ ||
              rank >= s_.world_size)
            return true;  // not one of ours
          ch.hello = true;
          ch.rank = rank;
          hosts_[static_cast<size_t>(rank)] = host;
          heard_[static_cast<size_t>(rank)] = Clock::now();
          shims_[static_cast<size_t>(rank)] = &ch;
          // A shim that arrives during a teardown gets the teardown's signal at once.
          if (teardown_signal_ != 0) send_to_shim(rank, encode_frame(FrameType::signal, std::to_string(teardown_signal_)));
          if (released_) send_to_shim(rank, encode_frame(FrameType::release, ""));
        } else if (type == FrameType::started) {
          const pid_t pid = static_cast<pid_t>(std::atol(payload.c_str()));
          // On this host (one-host jobs), the guardian can take the rank's group down.
          if (pid > 1 && s_.hosts.empty()) {
            rank_groups_[static_cast<size_t>(ch.rank)] = pid;
            guardian_.watch_group(pid);
          }
        } else if (type == FrameType::out || type == FrameType::err) {
          router_.feed(ch.rank, type == FrameType::out ? Stream::out : Stream::err, payload.data(), payload.size());
        } else if (type == FrameType::exit) {
          int code = 0, sig = 0;
          if (parse_exit(payload, code, sig)) {
            router_.finish(ch.rank, Stream::out);
            router_.finish(ch.rank, Stream::err);
            rank_ended(ch.rank, code, sig);
          }
        }
      }
    } catch (const Error&) {
      return true;
    }
    return false;
  }

  void accept_shim() {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    auto c = std::make_unique<Channel>();
    c->fd = fd;
    c->shim = true;
    channels_.push_back(std::move(c));
  }

  // Polls channels (and the listener/signals) once for at most `timeout_ms`.
  void poll_once(int timeout_ms) {
    std::vector<pollfd> fds;
    fds.push_back({signals_->fd(), POLLIN, 0});
    fds.push_back({listen_fd_, POLLIN, 0});
    for (auto& c : channels_) fds.push_back({c->fd, POLLIN, 0});
    // Our own stdout/stderr, when bytes wait for a slow reader: they are written as the
    // reader takes them, never blocking this loop.
    for (const pollfd& out : sink_.pollfds()) fds.push_back(out);
    int n = poll(fds.data(), fds.size(), timeout_ms);
    sink_.flush_ready();
    if (n <= 0) return;
    if (fds[0].revents) {
      for (int sig : signals_->take()) {
        if (sig == SIGCHLD) continue;
        router_.note("nano-run: received " + signal_name(sig) + "; forwarding it to every rank");
        apply(supervisor_.received_signal(sig));
      }
    }
    std::vector<size_t> closed;
    for (size_t i = 0; i < channels_.size(); ++i) {
      if (fds[i + 2].revents && read_channel(*channels_[i])) closed.push_back(i);
    }
    for (auto it = closed.rbegin(); it != closed.rend(); ++it) {
      const Channel& ch = *channels_[*it];
      // A shim stays until released, after its rank's final status: an earlier end is a loss.
      if (ch.shim && ch.hello && !supervisor_.exited(ch.rank)) {
        // On this host that is mpirun's doing, mostly because it lost a daemon elsewhere (Open MPI 5
        // notices a cut link on its own): a host silent for half the heartbeat timeout is the cause.
        if (hosts_[static_cast<size_t>(ch.rank)] == host_name()) lose_silent_hosts(o_.heartbeat_timeout / 2);
        lose_rank(ch.rank, "its shim's connection to nano-run closed");
      }
      for (auto& shim : shims_)
        if (shim == channels_[*it].get()) shim = nullptr;
      close(channels_[*it]->fd);
      channels_.erase(channels_.begin() + static_cast<long>(*it));
    }
    if (listen_fd_ >= 0 && fds[1].revents) accept_shim();
  }

  bool reap() {
    bool any_running = false;
    for (auto& c : children_) {
      if (!c.running) continue;
      int status;
      pid_t got = waitpid(c.pid, &status, WNOHANG);
      if (got == c.pid) {
        c.running = false;
        int code, sig;
        decode_wait_status(status, code, sig);
        if (c.rank >= 0) {
          rank_ended(c.rank, code, sig);
        } else {
          drain();  // the shims' last frames (their exit statuses) come before mpirun's verdict
          if (!supervisor_.root_cause() && supervisor_.interrupted_by() == 0 && (code != 0 || sig != 0))
            router_.note("nano-run: mpirun " + describe_end(code, sig));
          apply(supervisor_.backend_exited(code, sig));
        }
      } else {
        any_running = true;
      }
    }
    return any_running;
  }

  void drain() {
    auto until = Clock::now() + std::chrono::milliseconds(500);
    while (!channels_.empty() && Clock::now() < until) poll_once(50);
  }

  void loop() {
    while (reap()) {
      int timeout = 100;
      if (mpirun_deadline_ && Clock::now() >= *mpirun_deadline_) {
        // mpirun did not end after its ranks did (or after they were killed): end it.
        killpg(mpirun_pid_, SIGKILL);
        mpirun_deadline_.reset();
      }
      if (deadline_) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline_ - Clock::now()).count();
        if (left <= 0) {
          router_.note("nano-run: grace period over; killing the remaining ranks");
          apply(supervisor_.grace_expired());
          deadline_.reset();
        } else {
          timeout = static_cast<int>(std::min<long long>(left, timeout));
        }
      }
      poll_once(timeout);
      heartbeat();
    }
    drain();
    for (auto& c : channels_) close(c->fd);
    channels_.clear();
  }

  LaunchResult finish() {
    LaunchResult result;
    result.exit_code = supervisor_.exit_code();
    result.interrupted_by = supervisor_.interrupted_by();
    if (const auto& rc = supervisor_.root_cause()) {
      RankFailure f;
      f.rank = rc->rank >= 0 ? rc->rank + s_.rank_offset : rc->rank;
      f.exit_code = rc->exit_code;
      f.signal = rc->signal;
      f.host = rc->rank >= 0 ? hosts_[static_cast<size_t>(rc->rank)] : host_name();
      std::string tail;
      for (const auto& line : router_.stderr_tail(rc->rank)) tail += line + "\n";
      f.stderr_tail = tail;
      std::string who = rc->rank >= 0 ? "rank " + std::to_string(rc->rank + s_.rank_offset) : std::string("mpirun");
      if (rc->rank >= 0 && !lost_[static_cast<size_t>(rc->rank)].empty()) {
        f.lost = lost_[static_cast<size_t>(rc->rank)];
        router_.note("nano-run: root cause: " + describe_lost(rc->rank) + "; nano-run exits with " +
                     std::to_string(result.exit_code));
      } else {
        router_.note("nano-run: root cause: " + who + " on " + f.host + " " +
                     describe_end(rc->exit_code, rc->signal) + "; nano-run exits with " +
                     std::to_string(result.exit_code));
      }
      if (!tail.empty()) {
        router_.note("nano-run: last stderr lines of " + who + ":");
        for (const auto& line : router_.stderr_tail(rc->rank)) router_.note("  | " + line);
      }
      result.failure = f;
    } else if (supervisor_.interrupted_by() != 0) {
      router_.note("nano-run: stopped by " + signal_name(supervisor_.interrupted_by()) + "; exit " +
                   std::to_string(result.exit_code));
    }
    return result;
  }

  const LaunchOptions& o_;
  const Setup& s_;
  OutputRouter& router_;
  StdioSink& sink_;
  Guardian& guardian_;
  Supervisor supervisor_;
  std::vector<std::string> hosts_;
  std::vector<Channel*> shims_;     // by rank: the shim's link, once it said hello
  std::vector<pid_t> rank_groups_;  // by rank: its process group on this host (mpi backend)
  std::vector<Clock::time_point> heard_;  // by rank: the last frame from its shim
  std::vector<std::string> lost_;         // by rank: why its host counts as lost ("" = not)
  Clock::time_point last_beat_{};
  pid_t mpirun_pid_ = -1;
  int teardown_signal_ = 0;         // the signal of a teardown under way (mpi backend)
  bool released_ = false;
  std::optional<Clock::time_point> mpirun_deadline_;
  std::vector<Child> children_;
  std::vector<std::unique_ptr<Channel>> channels_;
  SignalPipe* signals_ = nullptr;
  int listen_fd_ = -1;
  std::string token_;
  std::optional<Clock::time_point> deadline_;
};

// Ignores a signal for its lifetime (the launcher runs inside user programs too).
class ScopedIgnore {
 public:
  explicit ScopedIgnore(int sig) : sig_(sig) {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(sig_, &ignore, &previous_);
  }
  ~ScopedIgnore() { sigaction(sig_, &previous_, nullptr); }
  ScopedIgnore(const ScopedIgnore&) = delete;
  ScopedIgnore& operator=(const ScopedIgnore&) = delete;

 private:
  int sig_;
  struct sigaction previous_ {};
};

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
  Setup s = prepare(options, argv, true);
  DryRun d;
  d.backend = s.backend == Backend::mpi ? "mpi" : "subprocess";
  d.notes = s.notes;
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
  if (s.backend == Backend::mpi) {
    ShimLink link;
    link.launcher = "<launcher>";
    link.token = "<token>";
    for (const auto& g : s.groups) link.group_starts.push_back(g.first_rank);
    d.command = mpi_command_for(options, s, link);
  }
  return d;
}

namespace {

// A restart's world: the same plan, a fresh job (its own files), a fresh rendezvous port unless
// the user fixed one (the old one may linger in TIME_WAIT), and the restart count.
void renew_for_restart(Setup& s, const LaunchOptions& o, int restarts) {
  s.job_id = make_job_id();
  if (!s.job_dir.empty()) s.job_dir = "/dev/shm/nano-" + s.job_id;
  if (o.master_port == 0) s.master_port = pick_free_port();
  for (auto& e : s.envs) {
    e.env["NANO_JOB_ID"] = s.job_id;
    e.env["NANO_RESTART_COUNT"] = std::to_string(restarts);
    e.env["MASTER_PORT"] = std::to_string(s.master_port);
  }
}

// One world from start to end, with its guardian and its files.
LaunchResult run_world(const LaunchOptions& options, const Setup& s, OutputRouter& router, StdioSink& sink) {
  Guardian guardian;
  const std::string shm_prefix = "nano-" + s.job_id + "-";
  guardian.remove_prefix("/dev/shm", shm_prefix);
  if (!s.job_dir.empty()) {
    guardian.remove_path(s.job_dir);
    if (mkdir(s.job_dir.c_str(), 0700) != 0) throw Error("cannot create " + s.job_dir + ": " + strerror(errno));
  }
  Run run(options, s, router, sink, guardian);
  LaunchResult result = s.backend == Backend::mpi ? run.mpi() : run.subprocess();
  // Every rank's group is gone by now: remove what the job left, then let the guardian go.
  if (!s.job_dir.empty()) remove_tree(s.job_dir.c_str());
  remove_with_prefix("/dev/shm", shm_prefix.c_str());
  guardian.dismiss();
  return result;
}

// Waits `delay` before a restart; returns the signal (SIGINT, SIGTERM, SIGHUP) that cut the wait
// short, or 0. Output keeps flowing meanwhile.
int wait_before_restart(std::chrono::milliseconds delay, StdioSink& sink) {
  SignalPipe signals({SIGINT, SIGTERM, SIGHUP});
  const auto until = Clock::now() + delay;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()).count();
    if (left <= 0) return 0;
    std::vector<pollfd> fds = {{signals.fd(), POLLIN, 0}};
    for (const pollfd& out : sink.pollfds()) fds.push_back(out);
    poll(fds.data(), fds.size(), static_cast<int>(std::min<long long>(left, 100)));
    sink.flush_ready();
    for (int sig : signals.take()) return sig;
  }
}

std::string attempt_name(int restarts) { return "attempt-" + std::to_string(restarts); }

}  // namespace

LaunchResult launch(const LaunchOptions& options, const std::vector<std::string>& argv) {
  if (options.max_restarts < 0)
    throw UsageError("--max-restarts must be at least 0, got " + std::to_string(options.max_restarts));
  Setup s = prepare(options, argv, false);
  StdioSink sink;
  OutputConfig config;
  config.tag = options.tag_output;
  config.show_ranks = options.output_ranks;
  config.log_dir = options.log_dir;
  config.rank_offset = s.rank_offset;
  OutputRouter router(s.world_size, config, sink);
  for (const auto& n : s.notes) router.note(n.rfind("nano-run:", 0) == 0 ? n : "nano-run: note: " + n);
  if (!s.warning.empty()) router.note(s.warning);
  // A closed reader of our output must not end the launch (EPIPE is handled where we write).
  ScopedIgnore no_sigpipe(SIGPIPE);
  LaunchResult result;
  for (int restarts = 0;; ++restarts) {
    if (restarts > 0) renew_for_restart(s, options, restarts);
    if (options.max_restarts > 0) router.start_attempt(attempt_name(restarts));
    result = run_world(options, s, router, sink);
    result.attempts = restarts + 1;
    if (!should_restart(result.exit_code, result.interrupted_by, restarts, options.max_restarts)) break;
    std::ostringstream delay;
    delay << options.restart_delay.count() / 1000.0;
    router.note("nano-run: restart " + std::to_string(restarts + 1) + " of " + std::to_string(options.max_restarts) +
                " in " + delay.str() + " s (attempt " + std::to_string(restarts + 1) + " ended with " +
                std::to_string(result.exit_code) + ")");
    if (int sig = wait_before_restart(options.restart_delay, sink)) {
      router.note("nano-run: stopped by " + signal_name(sig) + " before the restart; exit " + std::to_string(128 + sig));
      result.exit_code = 128 + sig;
      result.interrupted_by = sig;
      result.failure.reset();
      break;
    }
  }
  if (options.max_restarts > 0 && result.attempts > 1)
    router.note("nano-run: " + std::to_string(result.attempts) + " attempts; the last ended with " +
                std::to_string(result.exit_code));
  const std::string lost = sink.drain(std::chrono::seconds(5));
  if (!lost.empty()) {
    router.note(lost);
    sink.drain(std::chrono::seconds(1));
  }
  return result;
}

bool is_rank_shim_invocation(int argc, char** argv) {
  return argc > 1 && std::string(argv[1]) == kRankShimFlag;
}

}  // namespace nano
