// The mpi backend's per-rank shim (nano-run --nano-rank-shim SPEC): one code path for planning
// and binding on every host. It plans its host's LOCAL_SIZE ranks against its own topology with
// nano-run's stages, starts the program bound to its rank's CPUs, and streams the program's
// output, its torchelastic error file and its final status to the launcher (launcher/process/frames.h). The
// launcher, not mpirun, stops the rank: the shim delivers the signals the launcher sends to the
// rank's whole process group, and after the rank ended it stays until the launcher releases it,
// so mpirun never sees a rank end early and never starts a teardown of its own (its
// SIGTERM-then-SIGKILL ignores the grace period). When its parent (mpirun or orted) or the
// launcher goes away, the shim SIGKILLs the rank's process group (the rank's children with it)
// and exits.
#include "cli/shim.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <utility>

#include <nano/error.h>
#include "core/parse.h"
#include "core/rank_contract.h"
#include "core/setting.h"
#include "launcher/mpi/mpi_command.h"
#include "launcher/mpi/shim_loop.h"
#include "launcher/mpi/shim_spec.h"
#include "launcher/prepare/carried_env.h"
#include "launcher/prepare/hosts.h"
#include "launcher/prepare/job_files.h"
#include "launcher/prepare/launch_setup.h"
#include "launcher/prepare/port.h"
#include "launcher/prepare/rank_env.h"
#include "launcher/prepare/torchrun_env.h"
#include "launcher/process/frames.h"
#include "launcher/process/guardian.h"
#include "launcher/process/process_group.h"
#include "launcher/process/subprocess.h"
#include "launcher/process/timeouts.h"
#include "launcher/supervise/shim_channels.h"
#include "launcher/supervise/supervision_io.h"
#include "launcher/timeline/timeline_shipping.h"

namespace nano {
namespace {

using Clock = std::chrono::steady_clock;

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    throw UsageError(std::string("nano-run ") + kRankShimFlag + " must run under mpirun (" + name + " is not set)");
  const std::optional<long long> value = parse_integer(v, 0, INT_MAX);
  if (!value) throw UsageError(std::string("invalid ") + name + " '" + v + "'");
  return static_cast<int>(*value);
}

// The shim's side of its link to nano-run, and what it owns on its host.
struct ShimIo {
  int link = -1;               // socket to the launcher, -1 = plain output
  FrameDecoder from_launcher;  // the link's frames: the challenge, then signals and the release
  int rank = 0;
  // The rank's folder for this attempt (its error file), once made here. On another host than
  // nano-run's nobody else removes it, so it goes on every way the shim ends.
  std::string files_dir;
  // The rank's timeline records on another host than nano-run's: inside files_dir, shipped to
  // nano-run once the rank ended ("" = none to ship).
  std::string timeline;
  // Open MPI's session directories on a host other than nano-run's (Setup::session_dir), and
  // this shim's marker in it: the host's last shim to end removes the folder, since a daemon
  // cut off from mpirun, or killed by the teardown, leaves its own behind.
  std::string session_dir;
  std::string marker;

  void join_session_dir(const std::string& dir) {
    if (dir.empty()) return;
    // Usually there already: the daemon made it before starting us. Either way it must be this
    // user's private folder, or the rank ends here naming it (a folder someone else made first is
    // never shared, nor removed by us).
    join_private_folder(dir, host_name());
    marker = shim_marker_of(dir, rank);
    const int fd = create_private_file(marker);
    if (fd >= 0) close(fd);
    session_dir = dir;
  }

  void drop_files() {
    if (!files_dir.empty()) remove_tree(files_dir.c_str());
    files_dir.clear();
    if (session_dir.empty()) return;
    unlink(marker.c_str());
    if (!has_entry_with_prefix(session_dir, "nano-shim-")) remove_tree(session_dir.c_str());
    session_dir.clear();
  }

  // The launcher's challenge, the link's first frame, read within kShimHelloWithin; "" when
  // it did not come (the link is given up then).
  std::string read_challenge() {
    const auto deadline = Clock::now() + kShimHelloWithin;
    FrameType type;
    std::string payload;
    while (!from_launcher.next(type, payload)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      pollfd p{link, POLLIN, 0};
      if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) return "";
      char buf[512];
      const ssize_t n = read(link, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return "";
      from_launcher.feed(buf, static_cast<size_t>(n));
    }
    return type == FrameType::kChallenge ? payload : "";
  }

  void send(FrameType type, const std::string& payload) {
    if (link >= 0)
      write_all(link, encode_frame(type, payload));
    else
      write_all(type == FrameType::kOut ? 1 : 2, payload);
  }
};

// This rank as nano-run's stages make it: who it is, its CPUs and its environment.
struct PreparedRank {
  RankIdentity identity;
  RankPlan plan;
  bool bind_memory = false;  // the host has several NUMA nodes
  RankEnvironment env;
};

// Fail closed: the loader skips a library it cannot preload (with a warning) and the rank would
// listen unguarded, so a guard missing on this host stops the rank before it starts. nano-run
// checked only its own host's copy.
void check_listen_guard_here(const ListenGuard& guard) {
  if (guard.library.empty()) return;
  struct stat st {};
  if (stat(guard.library.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || access(guard.library.c_str(), R_OK) != 0)
    throw Error("the listen guard " + guard.library + " is not on host " + host_name() +
                ": its rank would listen unguarded, so nothing starts (install nano at the same path on every host)");
}

PreparedRank prepare_rank(const ShimSpec& spec, int rank) {
  check_listen_guard(spec.listen_guard);  // a guard that would refuse every listener: nothing starts
  check_listen_guard_here(spec.listen_guard);
  PreparedRank p;
  RankIdentity& id = p.identity;
  id.rank = rank;
  id.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
  id.world_size = env_int("OMPI_COMM_WORLD_SIZE");
  id.local_world_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
  id.group_rank = group_of_rank(spec.group_starts, rank);
  id.group_world_size = static_cast<int>(spec.group_starts.size());
  id.master_addr = spec.master_addr;
  id.master_port = spec.master_port;

  // Rank 0 hosts the rendezvous store: on a job over several hosts it may not be on the
  // launcher's host, where nano-run checked the port; check it where it will listen.
  if (id.rank == 0 && spec.group_starts.size() > 1 && id.master_port > 0) {
    const std::string unusable = port_unusable_reason(id.master_port);
    if (!unusable.empty())
      throw SettingError(Setting::kMasterPort, std::to_string(id.master_port),
                         "MASTER_PORT " + std::to_string(id.master_port) + " " +
                             (unusable == "busy" ? "is busy" : unusable) + " on " + host_name() +
                             ", where rank 0 listens (choose another with {master_port})");
  }
  const Topology topology = load_topology(spec.options.topology_xml, spec.options.synthetic);  // as nano-run planned
  const Plan plan = plan_host_ranks(topology, spec.options.plan, id.local_world_size);
  if (id.local_rank >= static_cast<int>(plan.ranks.size()))
    throw UsageError("local rank " + std::to_string(id.local_rank) + " has no CPUs in the plan");
  p.plan = plan.ranks[static_cast<size_t>(id.local_rank)];
  p.bind_memory = topology.numa_nodes.size() > 1;
  Environment current = current_environment();
  current.erase(kShimSecretVariable);  // the rank gets the secret as NANO_JOB_SECRET, with its attempt
  for (const auto& [name, value] : spec.carried_env) current[name] = value;  // as on the launching host
  current = restored_secrets(std::move(current));  // mpirun's environment brought them, never an argument
  // The user_kept and agent warnings are nano-run's (printed once, before mpirun starts), not
  // the shims'.
  // --env's values came with the carried variables, as the host's own environment.
  p.env =
      make_rank_environment(id, p.plan, spec.options.recipe, current, find_installed_library, {}, nano_python_folder());
  for (auto& [name, value] : attempt_variables(spec.attempt, rank)) p.env.env[name] = value;
  add_listen_guard(p.env.env, spec.listen_guard);
  // The plan's word, over whatever the host's or the carried environment brought along.
  const auto& launch = spec.launch_host_groups;
  p.env.env[contract::kLaunchHost] = std::count(launch.begin(), launch.end(), id.group_rank) ? "1" : "0";
  if (!spec.job_dir.empty())
    p.env.env[contract::kJobDir] = spec.job_dir;
  else
    p.env.env.erase(contract::kJobDir);
  return p;
}

// Whether nano-run runs on another host than this shim's.
bool launcher_elsewhere(const ShimSpec& spec) {
  return spec.launcher_host != host_name() && spec.launcher_host != "127.0.0.1";
}

// Connects to nano-run and says hello, answering the link's challenge with the attempt's
// secret; without a link (nano-run unreachable) the output goes through mpirun untagged.
void link_to_launcher(ShimIo& io, const ShimSpec& spec) {
  io.link = connect_to(spec.launcher_host, spec.launcher_port);
  const std::string challenge = io.link < 0 ? "" : io.read_challenge();
  if (!challenge.empty()) {
    io.send(FrameType::kHello,
            hello_payload(io.rank, host_name(), shim_answer(spec.attempt.secret, challenge, io.rank)));
    return;
  }
  if (io.link >= 0) close(io.link);
  io.link = -1;
  std::cerr << "nano-run: rank " << io.rank << ": cannot reach the launcher at " << spec.launcher_host << ":"
            << spec.launcher_port << "; output goes through mpirun untagged\n";
}

// Starts `program` as the prepared rank: bound to its CPUs (and NUMA nodes), in its environment,
// its output captured when it goes over the link.
Spawned start_rank(const PreparedRank& prepared, const std::vector<std::string>& program, bool capture_output) {
  SpawnRequest req;
  auto path_it = prepared.env.env.find("PATH");
  req.argv = program;
  req.argv[0] = resolve_program(program[0], path_it == prepared.env.env.end() ? "" : path_it->second);
  req.env = environment_strings(prepared.env.env);
  req.cpus = prepared.plan.cpus;
  if (prepared.bind_memory) req.numa_nodes = prepared.plan.numa_nodes;
  req.capture_output = capture_output;
  return spawn_process(req);
}

// The shim's parent (mpirun or orted), known by a pidfd: its bare pid may be another process's
// once it is gone. The pidfd is opened, then checked to be the parent's still (the pid could have
// been given to another process in between otherwise).
struct Parent {
  pid_t pid = getppid();
  int pidfd = -1;
  bool daemon = false;  // Open MPI's: the only parent ever taken down
  Parent() {
    std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    daemon = pid > 1 && is_open_mpi_parent(name);
    pidfd = open_pidfd(pid);
    if (pidfd >= 0 && getppid() != pid) {
      close(pidfd);
      pidfd = -1;
      daemon = false;  // it ended before we looked: what is named now is not it
    }
  }
  ~Parent() {
    if (pidfd >= 0) close(pidfd);
  }
  Parent(const Parent&) = delete;
  Parent& operator=(const Parent&) = delete;

  void kill_it() const {
    if (!daemon) return;
    if (pidfd >= 0) {
      signal_through_pidfd(pidfd, SIGKILL);
      return;
    }
    // A kernel without pidfds (before 5.3): only while it is still our parent, which is no other
    // process's pid (ours would have changed at its end).
    if (getppid() == pid) kill(pid, SIGKILL);
  }
};

// The one way out for a shim that gives up (its loop killed the rank's group already): the
// rank's files go, and on another host than the launcher's, when nano-run fell silent, this
// job's Open MPI daemon, our parent, goes too: it has lost its mpirun and would wait for it for
// many minutes.
[[noreturn]] void abandon(const ShimLoopEnd& end, ShimIo& io, const ShimSpec& spec, const Parent& parent) {
  if (end.abandoned == ShimAbandon::kLauncherSilent) {
    std::cerr << "nano-run: rank " << io.rank << " on " << host_name() << ": no word from nano-run at "
              << spec.launcher_host << ":" << spec.launcher_port << " for " << end.silence.count() / 1000
              << " s; ending the rank" << std::endl;
  }
  io.drop_files();
  if (end.abandoned == ShimAbandon::kLauncherSilent && launcher_elsewhere(spec)) parent.kill_it();
  _exit(137);
}

// What the shim sends once its rank ended and its output is drained: the timeline's records
// where they could not go to nano-run's folder, the error file torch's `record` wrote (read here,
// on the rank's host) and the final status.
void report(ShimIo& io, const ShimSpec& spec, const ProcessEnd& end) {
  if (!io.timeline.empty() && io.link >= 0)
    for (const std::string& payload : records_to_ship(io.timeline)) io.send(FrameType::kTimeline, payload);
  if (!io.files_dir.empty()) {
    const auto text = read_error_file(error_file_path(spec.attempt, io.rank));
    if (text && io.link >= 0) io.send(FrameType::kErrorFile, *text);
  }
  io.drop_files();
  // Unlinked, the status is this shim's exit code (run_rank_shim), not bytes on stderr.
  if (io.link >= 0) io.send(FrameType::kExit, exit_payload(end.exit_code, end.signal));
}

}  // namespace

bool is_rank_shim_invocation(int argc, char** argv) { return argc > 1 && std::string(argv[1]) == kRankShimFlag; }

int run_rank_shim(int argc, char** argv) {
  // No PR_SET_PDEATHSIG: a shim killed with its parent could not take the rank's children
  // along. The loop watches the parent instead.
  const Parent parent;
  signal(SIGPIPE, SIG_IGN);  // a launcher gone mid-write is seen as EOF on the link, not a death
  ShimIo io;
  OwnGroups rank_group;  // the rank's, once started: signalled only while it is still ours
  const std::unique_ptr<SupervisionIo> system = make_system_supervision_io(&rank_group);
  pid_t started = -1;  // the rank's process group, once started
  ShimSpec spec;
  std::vector<std::string> program;
  try {
    if (argc < 5 || std::string(argv[3]) != "--")
      throw UsageError(std::string("usage: nano-run ") + kRankShimFlag + " SPEC -- PROGRAM [ARGS...]");
    spec = decode_shim_spec(argv[2]);
    const char* secret = std::getenv(kShimSecretVariable);  // from mpirun's environment (add_job_secret)
    spec.attempt.secret = secret ? secret : "";
    spec.attempt.job_dir = spec.job_dir;
    program.assign(argv + 4, argv + argc);
  } catch (const Error& e) {
    std::cerr << "nano-run: " << e.what() << "\n";
    return 2;
  }
  try {
    io.rank = env_int("OMPI_COMM_WORLD_RANK");
    if (!spec.launcher_host.empty()) link_to_launcher(io, spec);
    PreparedRank prepared = prepare_rank(spec, io.rank);
    if (!spec.attempt.job_id.empty()) {
      make_rank_files_dir(spec.attempt, io.rank);
      io.files_dir = rank_files_dir(spec.attempt, io.rank);
      add_rank_open_mpi_settings(io.files_dir, prepared.env.env);
    }
    if (auto records = prepared.env.env.find(contract::kTimeline);
        records != prepared.env.env.end() && launcher_elsewhere(spec)) {
      io.timeline = make_shipping_folder(io.files_dir);
      records->second = io.timeline;  // "": the rank records nothing rather than into a stranger's folder
    }
    // nano-run removes its own host's copy once mpirun has ended.
    if (spec.launcher_host != host_name()) io.join_session_dir(spec.session_dir);

    // Caught before the rank starts: mpirun's SIGTERM must reach the rank, not end this shim.
    system->catch_signals();
    Spawned child = start_rank(prepared, program, io.link >= 0);
    started = child.pid;
    const GroupLeader leader = child.group.leader();
    rank_group.add(std::move(child.group));
    for (const auto& w : child.warnings)
      if (io.rank == 0) io.send(FrameType::kErr, "nano-run: warning: " + w + "\n");
    if (io.link >= 0) io.send(FrameType::kStarted, started_payload(leader));

    ShimLoopSetup setup;
    setup.link = io.link;
    setup.rank = child.pid;
    if (child.stdout_fd >= 0) setup.output = {child.stdout_fd, child.stderr_fd};
    setup.stdout_fd = child.stdout_fd;
    setup.parent = parent.pid;
    setup.heartbeat_timeout = spec.options.heartbeat_timeout;
    ShimLoop loop(setup, io.from_launcher, *system, [&](const ProcessEnd& end) { report(io, spec, end); });
    const ShimLoopEnd end = loop.run();
    if (end.abandoned != ShimAbandon::kNone) abandon(end, io, spec, parent);
    if (io.link >= 0) {
      close(io.link);
      return 0;  // the launcher has the rank's real status; mpirun must not act on it
    }
    return end.rank.signal != 0 ? 128 + end.rank.signal : end.rank.exit_code;
  } catch (const Error& e) {
    if (started > 0) rank_group.signal(started, SIGKILL);  // a shim that gives up takes its rank along
    io.drop_files();
    // Worded as the front end that started the launch names its settings.
    const std::string message =
        "nano-run: rank " + std::to_string(io.rank) + ": " + worded(e, names_of(spec.options.front_end)) + "\n";
    if (io.link >= 0) {
      io.send(FrameType::kErr, message);
      io.send(FrameType::kExit, exit_payload(2, 0));
    } else {
      std::cerr << message;
    }
    return 2;
  }
}

}  // namespace nano
