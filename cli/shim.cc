// The mpi backend's per-rank shim (nano-run --nano-rank-shim SPEC): one code path for planning
// and binding on every host. It plans its host's LOCAL_SIZE ranks against its own topology with
// nano-run's stages, starts the program bound to its rank's CPUs, and streams the program's
// output, its torchelastic error file and its final status to the launcher (cli/frames.h). The
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
#include <iostream>

#include <nano/error.h>
#include "cli/frames.h"
#include "cli/guardian.h"
#include "cli/heartbeat.h"
#include "cli/hosts.h"
#include "cli/job_files.h"
#include "cli/launch_setup.h"
#include "cli/port.h"
#include "cli/rank_env.h"
#include "cli/shim_spec.h"
#include "cli/signals.h"
#include "cli/subprocess.h"
#include "cli/timeouts.h"
#include "cli/torchrun_env.h"
#include "env-init/parse.h"
#include "env-init/setting.h"

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
  int link = -1;  // socket to the launcher, -1 = plain output
  int rank = 0;
  // The rank's folder for this attempt (its error file), once made here. On another host than
  // nano-run's nobody else removes it, so it goes on every way the shim ends.
  std::string files_dir;
  // Open MPI's session directories on a host other than nano-run's (Setup::session_dir), and
  // this shim's marker in it: the host's last shim to end removes the folder, since a daemon
  // cut off from mpirun, or killed by the teardown, leaves its own behind.
  std::string session_dir;
  std::string marker;

  void join_session_dir(const std::string& dir) {
    if (dir.empty()) return;
    mkdir(dir.c_str(), 0700);  // usually there already: the daemon made it before starting us
    marker = shim_marker_of(dir, rank);
    const int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
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

PreparedRank prepare_rank(const ShimSpec& spec, int rank) {
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
  const Topology topology = load_topology(spec.topology_xml, spec.synthetic);  // as nano-run planned
  const Plan plan = plan_host_ranks(topology, spec.plan, id.local_world_size);
  if (id.local_rank >= static_cast<int>(plan.ranks.size()))
    throw UsageError("local rank " + std::to_string(id.local_rank) + " has no CPUs in the plan");
  p.plan = plan.ranks[static_cast<size_t>(id.local_rank)];
  p.bind_memory = topology.numa_nodes.size() > 1;
  Environment current = current_environment();
  for (const auto& [name, value] : spec.carried_env) current[name] = value;  // as on the launching host
  // The user_kept and agent warnings are nano-run's (printed once, before mpirun starts), not
  // the shims'.
  // --env's values came with the carried variables, as the host's own environment.
  p.env = make_rank_environment(id, p.plan, spec.recipe, current, find_installed_library, {}, nano_python_folder());
  for (auto& [name, value] : attempt_variables(spec.attempt, rank)) p.env.env[name] = value;
  return p;
}

// Why the shim gives its rank up on its own, without waiting for nano-run.
enum class Abandon {
  kParentGone,    // mpirun/orted is gone: nobody supervises us any more
  kLauncherGone,  // the link closed: nano-run was killed
  kLauncherSilent,
};

// The one way out for a shim that gives up: the rank's whole group and its files go, and on
// another host than the launcher's (when nano-run fell silent) this job's Open MPI daemon, our
// parent, goes too: it has lost its mpirun and would wait for it for many minutes.
[[noreturn]] void abandon(Abandon why, pid_t child, ShimIo& io, pid_t parent, bool launcher_elsewhere) {
  killpg(child, SIGKILL);
  io.drop_files();
  if (why == Abandon::kLauncherSilent && launcher_elsewhere) kill(parent, SIGKILL);
  _exit(137);
}

// Supervises the started rank until it ended, its output is drained and (when linked) the
// launcher released us: the shim's side of what nano-run's supervision loop does for all ranks.
class ShimLoop {
 public:
  ShimLoop(const ShimSpec& spec, ShimIo& io, const Spawned& child, SignalPipe& signals, pid_t parent)
      : spec_(spec),
        io_(io),
        child_(child),
        signals_(signals),
        parent_(parent),
        heartbeat_(spec.heartbeat_timeout, Clock::now()) {
    if (child.stdout_fd >= 0) open_fds_ = {child.stdout_fd, child.stderr_fd};
  }

  /// Returns the rank's wait status.
  int run() {
    while (!exited_ || !open_fds_.empty() || (io_.link >= 0 && !released_)) {
      std::vector<pollfd> fds = {{signals_.fd(), POLLIN, 0}, {io_.link, POLLIN, 0}};
      for (int fd : open_fds_) fds.push_back({fd, POLLIN, 0});
      poll(fds.data(), fds.size(), static_cast<int>(kShimPollInterval.count()));
      if (getppid() != parent_) give_up(Abandon::kParentGone);
      if (io_.link >= 0) keep_heartbeat();
      for (int sig : signals_.take())
        if (sig != SIGCHLD) deliver(sig);  // from mpirun/orted itself
      if (fds[1].revents) read_link();
      for (size_t i = 2; i < fds.size(); ++i)
        if (fds[i].revents) forward_output(fds[i].fd);
      if (!exited_ && waitpid(child_.pid, &status_, WNOHANG) == child_.pid) {
        exited_ = true;
        killpg(child_.pid, SIGKILL);  // no leftovers of this rank's group keep its pipes open
      }
      if (exited_ && open_fds_.empty() && !reported_) report();
    }
    return status_;
  }

 private:
  [[noreturn]] void give_up(Abandon why) {
    const bool launcher_elsewhere = spec_.launcher_host != host_name() && spec_.launcher_host != "127.0.0.1";
    abandon(why, child_.pid, io_, parent_, launcher_elsewhere);
  }

  void deliver(int sig) {
    if (exited_) return;
    killpg(child_.pid, sig);
    // A stopped rank acts on SIGTERM/SIGINT only once continued.
    if (sig != SIGKILL && sig != SIGCONT) killpg(child_.pid, SIGCONT);
  }

  void keep_heartbeat() {
    const auto now = Clock::now();
    if (heartbeat_.beat_due(now)) io_.send(FrameType::kHeartbeat, "");
    if (!heartbeat_.lost(now)) return;
    std::cerr << "nano-run: rank " << io_.rank << " on " << host_name() << ": no word from nano-run at "
              << spec_.launcher_host << ":" << spec_.launcher_port << " for " << heartbeat_.silence(now).count() / 1000
              << " s; ending the rank" << std::endl;
    give_up(Abandon::kLauncherSilent);
  }

  // The launcher's frames: signals to deliver, the release.
  void read_link() {
    char buf[4096];
    const ssize_t n = read(io_.link, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) give_up(Abandon::kLauncherGone);
    if (n <= 0) return;
    heartbeat_.heard(Clock::now());
    commands_.feed(buf, static_cast<size_t>(n));
    FrameType type;
    std::string payload;
    while (commands_.next(type, payload)) {
      if (type == FrameType::kSignal)
        deliver(static_cast<int>(parse_integer(payload, 0, 64).value_or(0)));
      else if (type == FrameType::kRelease)
        released_ = true;
    }
  }

  void forward_output(int fd) {
    char buf[65536];
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) return;
    if (n > 0) {
      io_.send(fd == child_.stdout_fd ? FrameType::kOut : FrameType::kErr, std::string(buf, static_cast<size_t>(n)));
      return;
    }
    close(fd);
    open_fds_.erase(std::find(open_fds_.begin(), open_fds_.end(), fd));
  }

  void report() {
    int code, sig;
    decode_wait_status(status_, code, sig);
    // What torch's `record` wrote is read here, on the rank's host, and travels to nano-run.
    if (!io_.files_dir.empty()) {
      const auto text = read_error_file(error_file_path(spec_.attempt.job_id, io_.rank));
      if (text && io_.link >= 0) io_.send(FrameType::kErrorFile, *text);
    }
    io_.drop_files();
    // Unlinked, the status is this shim's exit code (run_rank_shim), not bytes on stderr.
    if (io_.link >= 0) io_.send(FrameType::kExit, exit_payload(code, sig));
    reported_ = true;
  }

  const ShimSpec& spec_;
  ShimIo& io_;
  const Spawned& child_;
  SignalPipe& signals_;
  const pid_t parent_;
  Heartbeat heartbeat_;
  FrameDecoder commands_;
  std::vector<int> open_fds_;
  int status_ = 0;
  bool exited_ = false, reported_ = false, released_ = false;
};

}  // namespace

bool is_rank_shim_invocation(int argc, char** argv) { return argc > 1 && std::string(argv[1]) == kRankShimFlag; }

int run_rank_shim(int argc, char** argv) {
  // No PR_SET_PDEATHSIG: a shim killed with its parent could not take the rank's children
  // along. The loop watches the parent instead.
  const pid_t parent = getppid();
  signal(SIGPIPE, SIG_IGN);  // a launcher gone mid-write is seen as EOF on the link, not a death
  ShimIo io;
  pid_t started = -1;  // the rank's process group, once started
  ShimSpec spec;
  std::vector<std::string> program;
  try {
    if (argc < 5 || std::string(argv[3]) != "--")
      throw UsageError(std::string("usage: nano-run ") + kRankShimFlag + " SPEC -- PROGRAM [ARGS...]");
    spec = decode_shim_spec(argv[2]);
    program.assign(argv + 4, argv + argc);
  } catch (const Error& e) {
    std::cerr << "nano-run: " << e.what() << "\n";
    return 2;
  }
  try {
    io.rank = env_int("OMPI_COMM_WORLD_RANK");
    if (!spec.launcher_host.empty()) {
      io.link = connect_to(spec.launcher_host, spec.launcher_port);
      if (io.link < 0)
        std::cerr << "nano-run: rank " << io.rank << ": cannot reach the launcher at " << spec.launcher_host << ":"
                  << spec.launcher_port << "; output goes through mpirun untagged\n";
      else
        io.send(FrameType::kHello, hello_payload(spec.token, io.rank, host_name()));
    }
    PreparedRank prepared = prepare_rank(spec, io.rank);
    if (!spec.attempt.job_id.empty()) {
      make_rank_files_dir(spec.attempt.job_id, io.rank);
      io.files_dir = rank_files_dir(spec.attempt.job_id, io.rank);
    }
    // nano-run removes its own host's copy once mpirun has ended.
    if (spec.launcher_host != host_name()) io.join_session_dir(spec.session_dir);

    SignalPipe signals({SIGINT, SIGTERM, SIGHUP, SIGCHLD});
    SpawnRequest req;
    auto path_it = prepared.env.env.find("PATH");
    req.argv = program;
    req.argv[0] = resolve_program(program[0], path_it == prepared.env.env.end() ? "" : path_it->second);
    req.env = environment_strings(prepared.env.env);
    req.cpus = prepared.plan.cpus;
    if (prepared.bind_memory) req.numa_nodes = prepared.plan.numa_nodes;
    req.capture_output = io.link >= 0;
    const Spawned child = spawn_process(req);
    started = child.pid;
    for (const auto& w : child.warnings)
      if (io.rank == 0) io.send(FrameType::kErr, "nano-run: warning: " + w + "\n");
    if (io.link >= 0) io.send(FrameType::kStarted, std::to_string(child.pid));

    const int status = ShimLoop(spec, io, child, signals, parent).run();
    if (io.link >= 0) {
      close(io.link);
      return 0;  // the launcher has the rank's real status; mpirun must not act on it
    }
    int code, sig;
    decode_wait_status(status, code, sig);
    return sig != 0 ? 128 + sig : code;
  } catch (const Error& e) {
    if (started > 0) killpg(started, SIGKILL);  // a shim that gives up takes its rank along
    io.drop_files();
    // Worded as the front end that started the launch names its settings.
    const std::string message =
        "nano-run: rank " + std::to_string(io.rank) + ": " + worded(e, names_of(spec.front_end)) + "\n";
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
