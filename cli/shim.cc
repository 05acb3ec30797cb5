// The mpi backend's per-rank shim (nano-run --nano-rank-shim): one code path for planning and
// binding on every host. It plans its host's LOCAL_SIZE ranks against its own topology, starts
// the program bound to its rank's CPUs, and streams the program's output, its torchelastic
// error file and its final status to the launcher (cli/frames.h). The launcher, not mpirun,
// stops the rank: the shim delivers the signals the launcher sends to the rank's whole process
// group, and after the rank ended it stays until the launcher releases it, so mpirun never sees
// a rank end early and never starts a teardown of its own (its SIGTERM-then-SIGKILL ignores the
// grace period). When its parent (mpirun or orted) or the launcher goes away, the shim SIGKILLs
// the rank's process group (the rank's children with it) and exits.
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
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
#include "cli/hosts.h"
#include "cli/launch_setup.h"
#include "cli/launcher.h"
#include "cli/options.h"
#include "cli/port.h"
#include "cli/rank_env.h"
#include "cli/signals.h"
#include "cli/subprocess.h"
#include "cli/timeouts.h"
#include "cli/torchrun_env.h"
#include "env-init/parse.h"
#include "env-init/topology.h"

namespace nano {
namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v)
    throw UsageError(std::string("nano-run ") + kRankShimFlag + " must run under mpirun (" + name + " is not set)");
  const std::optional<long long> value = parse_integer(v, 0, INT_MAX);
  if (!value) throw UsageError(std::string("invalid ") + name + " '" + v + "'");
  return static_cast<int>(*value);
}

struct ShimRun {
  int link = -1;  // socket to the launcher, -1 = plain output
  int rank = 0;
  // The rank's folder for this attempt (its error file), once made here. On another host than
  // nano-run's nobody else removes it, so it goes on every way the shim ends.
  std::string files_dir;

  void drop_files() {
    if (!files_dir.empty()) remove_tree(files_dir.c_str());
    files_dir.clear();
  }

  void send(FrameType type, const std::string& payload) {
    if (link >= 0)
      write_all(link, encode_frame(type, payload));
    else
      write_all(type == FrameType::kOut ? 1 : 2, payload);
  }
};

}  // namespace

int run_rank_shim(int argc, char** argv) {
  // No PR_SET_PDEATHSIG: a shim killed with its parent could not take the rank's children
  // along. The loop below watches the parent instead.
  pid_t parent = getppid();
  signal(SIGPIPE, SIG_IGN);  // a launcher gone mid-write is seen as EOF on the link, not a death
  ShimRun io;
  RunCommand cmd;
  try {
    cmd = parse_run_command(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const Error& e) {
    std::cerr << "nano-run: " << e.what() << "\n";
    return 2;
  }
  const LaunchOptions& o = cmd.launch;
  try {
    int rank = env_int("OMPI_COMM_WORLD_RANK");
    io.rank = rank;
    if (!cmd.link.launcher.empty()) {
      auto colon = cmd.link.launcher.rfind(':');
      const std::optional<long long> port =
          colon == std::string::npos ? std::nullopt : parse_integer(cmd.link.launcher.substr(colon + 1), 1, 65535);
      if (!port) throw UsageError("invalid launcher address '" + cmd.link.launcher + "': expected HOST:PORT");
      io.link = connect_to(cmd.link.launcher.substr(0, colon), static_cast<int>(*port));
      if (io.link < 0)
        std::cerr << "nano-run: rank " << rank << ": cannot reach the launcher at " << cmd.link.launcher
                  << "; output goes through mpirun untagged\n";
      else
        io.send(FrameType::kHello, hello_payload(cmd.link.token, rank, host_name()));
    }
    RankIdentity id;
    id.rank = rank;
    id.local_rank = env_int("OMPI_COMM_WORLD_LOCAL_RANK");
    id.world_size = env_int("OMPI_COMM_WORLD_SIZE");
    id.local_world_size = env_int("OMPI_COMM_WORLD_LOCAL_SIZE");
    id.group_rank = group_of_rank(cmd.link.group_starts, rank);
    id.group_world_size = static_cast<int>(cmd.link.group_starts.size());
    id.master_addr = o.master_addr.empty() ? "127.0.0.1" : o.master_addr;
    id.master_port = o.master_port;

    // Rank 0 hosts the rendezvous store: on a job over several hosts it may not be on the
    // launcher's host, where nano-run checked the port; check it where it will listen.
    if (id.rank == 0 && cmd.link.group_starts.size() > 1 && id.master_port > 0) {
      try {
        check_port_free(id.master_port);
      } catch (const UsageError&) {
        throw UsageError("MASTER_PORT " + std::to_string(id.master_port) + " is busy on " + host_name() +
                         ", where rank 0 listens (choose another with --master-port)");
      }
    }
    Topology topology = load_topology(o);  // as nano-run planned
    PlanOptions po = o.plan;
    po.num_processes = id.local_world_size;
    Plan plan = make_plan(topology, po);
    if (id.local_rank >= static_cast<int>(plan.ranks.size()))
      throw UsageError("local rank " + std::to_string(id.local_rank) + " has no CPUs in the plan");
    const RankPlan& mine = plan.ranks[static_cast<size_t>(id.local_rank)];
    Environment current = current_environment();
    for (const auto& [name, value] : cmd.link.env) current[name] = value;  // as on the launching host
    RankEnvironment env =
        make_rank_environment(id, mine, o.recipe, current, find_installed_library, o.extra_env, nano_python_folder());
    // The user_kept and agent warnings are nano-run's (printed once, before mpirun starts), not
    // the shims'.
    for (auto& [name, value] : attempt_variables(cmd.link.attempt, rank)) env.env[name] = value;
    if (cmd.argv.empty()) throw UsageError("missing PROGRAM");
    if (!cmd.link.attempt.job_id.empty()) {
      make_rank_files_dir(cmd.link.attempt.job_id, rank);
      io.files_dir = rank_files_dir(cmd.link.attempt.job_id, rank);
    }

    SignalPipe signals({SIGINT, SIGTERM, SIGHUP, SIGCHLD});
    SpawnRequest req;
    auto path_it = env.env.find("PATH");
    req.argv = cmd.argv;
    req.argv[0] = resolve_program(cmd.argv[0], path_it == env.env.end() ? "" : path_it->second);
    req.env = environment_strings(env.env);
    req.cpus = mine.cpus;
    if (topology.numa_nodes.size() > 1) req.numa_nodes = mine.numa_nodes;
    req.capture_output = io.link >= 0;
    Spawned child = spawn_process(req);
    for (const auto& w : child.warnings)
      if (rank == 0) io.send(FrameType::kErr, "nano-run: warning: " + w + "\n");

    if (io.link >= 0) io.send(FrameType::kStarted, std::to_string(child.pid));

    std::vector<int> open_fds;
    if (child.stdout_fd >= 0) open_fds = {child.stdout_fd, child.stderr_fd};
    int status = 0;
    bool exited = false, reported = false, released = false;
    // The launcher's heartbeat: a cut link or a lost launcher host never closes the connection.
    using Clock = std::chrono::steady_clock;
    const auto heartbeat = o.heartbeat_timeout;
    auto heard = Clock::now(), beat = Clock::now();
    const std::string launcher_host = cmd.link.launcher.substr(0, cmd.link.launcher.rfind(':'));
    FrameDecoder commands;
    auto deliver = [&](int sig) {
      if (exited) return;
      killpg(child.pid, sig);
      // A stopped rank acts on SIGTERM/SIGINT only once continued.
      if (sig != SIGKILL && sig != SIGCONT) killpg(child.pid, SIGCONT);
    };
    // Runs until the rank ended, its output is drained and (when linked) the launcher released us.
    while (!exited || !open_fds.empty() || (io.link >= 0 && !released)) {
      std::vector<pollfd> fds = {{signals.fd(), POLLIN, 0}, {io.link, POLLIN, 0}};
      for (int fd : open_fds) fds.push_back({fd, POLLIN, 0});
      poll(fds.data(), fds.size(), static_cast<int>(kShimPollInterval.count()));
      if (getppid() != parent) {  // mpirun/orted is gone: nobody supervises us any more
        killpg(child.pid, SIGKILL);
        io.drop_files();
        _exit(137);
      }
      if (io.link >= 0) {
        const auto now = Clock::now();
        if (now - beat >= heartbeat / kHeartbeatsPerTimeout) {
          beat = now;
          io.send(FrameType::kHeartbeat, "");
        }
        if (now - heard > heartbeat) {
          // The launcher cannot reach us or we it: nothing of this job may stay. On another
          // host than the launcher's, this job's Open MPI daemon (our parent) goes too: it has
          // lost its mpirun and would wait for it for many minutes.
          std::cerr << "nano-run: rank " << rank << " on " << host_name() << ": no word from nano-run at "
                    << cmd.link.launcher << " for "
                    << std::chrono::duration_cast<std::chrono::seconds>(now - heard).count() << " s; ending the rank"
                    << std::endl;
          killpg(child.pid, SIGKILL);
          io.drop_files();
          if (launcher_host != host_name() && launcher_host != "127.0.0.1") kill(parent, SIGKILL);
          _exit(137);
        }
      }
      for (int sig : signals.take())
        if (sig != SIGCHLD) deliver(sig);  // from mpirun/orted itself
      if (fds[1].revents) {
        char buf[4096];
        ssize_t n = read(io.link, buf, sizeof buf);
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
          // The launcher is gone (killed): the rank and its children go too.
          killpg(child.pid, SIGKILL);
          io.drop_files();
          _exit(137);
        }
        if (n > 0) {
          heard = Clock::now();
          commands.feed(buf, static_cast<size_t>(n));
          FrameType type;
          std::string payload;
          while (commands.next(type, payload)) {
            if (type == FrameType::kSignal)
              deliver(static_cast<int>(parse_integer(payload, 0, 64).value_or(0)));
            else if (type == FrameType::kRelease)
              released = true;
          }
        }
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!fds[i].revents) continue;
        char buf[65536];
        ssize_t n = read(fds[i].fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          close(fds[i].fd);
          open_fds.erase(std::find(open_fds.begin(), open_fds.end(), fds[i].fd));
        } else {
          io.send(fds[i].fd == child.stdout_fd ? FrameType::kOut : FrameType::kErr,
                  std::string(buf, static_cast<size_t>(n)));
        }
      }
      if (!exited && waitpid(child.pid, &status, WNOHANG) == child.pid) {
        exited = true;
        killpg(child.pid, SIGKILL);  // no leftovers of this rank's group keep its pipes open
      }
      if (exited && open_fds.empty() && !reported) {
        int code, sig;
        decode_wait_status(status, code, sig);
        // What torch's `record` wrote is read here, on the rank's host, and travels to nano-run.
        if (!io.files_dir.empty()) {
          const auto text = read_error_file(error_file_path(cmd.link.attempt.job_id, rank));
          if (text && io.link >= 0) io.send(FrameType::kErrorFile, *text);
          io.drop_files();
        }
        // Unlinked, the status is this shim's exit code (below), not bytes on stderr.
        if (io.link >= 0) io.send(FrameType::kExit, exit_payload(code, sig));
        reported = true;
      }
    }
    int code, sig;
    decode_wait_status(status, code, sig);
    if (io.link >= 0) {
      close(io.link);
      return 0;  // the launcher has the rank's real status; mpirun must not act on it
    }
    return sig != 0 ? 128 + sig : code;
  } catch (const Error& e) {
    io.drop_files();
    std::string message = "nano-run: rank " + std::to_string(io.rank) + ": " + e.what() + "\n";
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
