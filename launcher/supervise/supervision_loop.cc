#include "launcher/supervise/supervision_loop.h"

#include <signal.h>

#include <algorithm>

#include "core/rank_contract.h"
#include "launcher/prepare/launch_setup.h"
#include "launcher/prepare/port.h"
#include "launcher/prepare/torchrun_env.h"
#include "launcher/process/signals.h"
#include "launcher/process/timeouts.h"
#include "launcher/supervise/root_cause.h"

namespace nano {
namespace {

// nano-run's signals are caught while one world runs, whichever way run() leaves.
class CaughtSignals {
 public:
  explicit CaughtSignals(SupervisionIo& io) : io_(io) { io_.catch_signals(); }
  ~CaughtSignals() { io_.release_signals(); }
  CaughtSignals(const CaughtSignals&) = delete;
  CaughtSignals& operator=(const CaughtSignals&) = delete;

 private:
  SupervisionIo& io_;
};

}  // namespace

SupervisionLoop::SupervisionLoop(const Setup& s, OutputRouter& router, StdioSink& sink, OwnGroups& groups)
    : SupervisionLoop(s, router, sink, make_system_supervision_io(&groups), nullptr) {}

SupervisionLoop::SupervisionLoop(const Setup& s, OutputRouter& router, StdioSink& sink, SupervisionIo& io)
    : SupervisionLoop(s, router, sink, nullptr, &io) {}

SupervisionLoop::SupervisionLoop(const Setup& s, OutputRouter& router, StdioSink& sink,
                                 std::unique_ptr<SupervisionIo> owned, SupervisionIo* given)
    : setup_(s),
      router_(router),
      sink_(sink),
      owned_io_(std::move(owned)),
      io_(given ? *given : *owned_io_),
      supervisor_(s.world_size),
      shims_(s.world_size, s.hosts.empty(), router, *this, io_),
      lost_(static_cast<size_t>(s.world_size)),
      ends_(static_cast<size_t>(s.world_size)),
      beat_(s.options.heartbeat_timeout, Clock::time_point{}) {}

LaunchResult SupervisionLoop::run(RankStarter& starter) {
  CaughtSignals caught(io_);
  starter_ = &starter;
  Started started = starter.start();
  for (const auto& p : started.processes) {
    if (p.rank < 0) backend_pid_ = p.pid;
    children_.push_back({p.pid, p.rank, true});
    add_pipe(p.stdout_fd, p.rank < 0 ? kMpirunStream : p.rank, Stream::kOut);
    add_pipe(p.stderr_fd, p.rank < 0 ? kMpirunStream : p.rank, Stream::kErr);
  }
  listen_fd_ = started.listen_fd;
  started_at_ = io_.now();
  for (auto& w : started.warnings) router_.note("nano-run: warning: " + w);
  loop();
  std::vector<pid_t> groups;
  for (const auto& c : children_) groups.push_back(c.pid);
  starter.clean_up(groups);
  return finish();
}

void SupervisionLoop::rank_started_here(int, const GroupLeader& leader) { io_.watch_group(leader); }

void SupervisionLoop::add_pipe(int fd, int rank, Stream stream) {
  auto c = std::make_unique<Channel>();
  c->fd = fd;
  c->rank = rank;
  c->stream = stream;
  channels_.push_back(std::move(c));
}

// Delivers `sig` to every rank still running, the backend's way.
void SupervisionLoop::deliver(int sig) {
  std::vector<pid_t> running;
  for (const auto& c : children_)
    if (c.running) running.push_back(c.pid);
  starter_->deliver(sig, running, supervisor_);
}

// Every rank has ended: the shims may exit now, and mpirun with them.
void SupervisionLoop::release_shims() {
  if (shims_.released()) return;
  router_.hide(kMpirunStream);  // its words on ranks it saw end are nano-run's to tell
  shims_.release();
  // mpirun waits for a lost host's daemon it can no longer reach: give it less time.
  const bool host_lost = std::any_of(lost_.begin(), lost_.end(), [](const std::string& why) { return !why.empty(); });
  mpirun_deadline_ = io_.now() + (host_lost ? kMpirunEndAfterHostLost : kMpirunEndAfterRelease);
}

void SupervisionLoop::apply(const Decision& d) {
  if (d.kind == Decision::kSignalAll) {
    deliver(d.signal);
    if (d.start_grace) deadline_ = io_.now() + setup_.options.grace_period;
  } else if (d.kind == Decision::kKillAll) {
    deliver(SIGKILL);
    deadline_.reset();
    // Shims that do not confirm their rank's end by then are taken down with mpirun.
    if (backend_pid_ > 0) mpirun_deadline_ = io_.now() + kMpirunEndAfterKill;
  }
  if (backend_pid_ > 0 && supervisor_.all_exited()) release_shims();
}

void SupervisionLoop::rank_ended(int rank, int code, int sig) {
  const Decision d = supervisor_.rank_exited(rank, code, sig);
  if (rank >= 0 && static_cast<size_t>(rank) < ends_.size()) ends_[static_cast<size_t>(rank)] = describe_end(code, sig);
  const bool planned = stop_asked_ && sig == 0 && code == contract::kStoppedAtCheckpointExitCode;
  if (d.announce && planned) {
    router_.note("nano-run: rank " + std::to_string(rank + setup_.rank_offset) +
                 " stopped at its checkpoint, as asked; so do the others");
  } else if (d.announce) {
    const std::string what = lost_[static_cast<size_t>(rank)].empty()
                                 ? "rank " + std::to_string(rank + setup_.rank_offset) + " " + describe_end(code, sig)
                                 : describe_lost(rank, hosts_by_rank(), lost_, host_name());
    router_.note("nano-run: " + what +
                 (d.replaces_root_cause
                      ? " (not by nano-run): the root cause; the failure told before was its consequence"
                      : "; stopping the other ranks"));
  }
  if (d.start_settle) settle_deadline_ = io_.now() + kRootCauseSettle;
  apply(d);
}

// A rank whose shim went away without its final status, or fell silent: its host (or the
// link to it) is gone. It counts as ended with kLostHostExitCode; nothing more comes from it.
void SupervisionLoop::lose_rank(int rank, const std::string& why) {
  const auto r = static_cast<size_t>(rank);
  if (supervisor_.exited(rank) || !lost_[r].empty()) return;
  lost_[r] = why;
  shims_.unlink(rank);
  router_.finish(rank, Stream::kOut);
  router_.finish(rank, Stream::kErr);
  rank_ended(rank, kLostHostExitCode, 0);
}

// Where each rank runs: as its shim said, or, for a rank whose shim never said hello, as planned
// (a host whose shims did not start is named, not the launching host).
std::vector<std::string> SupervisionLoop::hosts_by_rank() const {
  std::vector<std::string> hosts = shims_.hosts();
  for (const HostGroup& g : setup_.groups)
    for (int r = g.first_rank; r < g.first_rank + g.size && r < setup_.world_size; ++r)
      if (!shims_.said_hello(r)) hosts[static_cast<size_t>(r)] = g.launch_host || g.host.empty() ? host_name() : g.host;
  return hosts;
}

// Every linked rank not heard from for `silence` counts as lost with its host.
void SupervisionLoop::lose_silent_hosts(std::chrono::milliseconds silence) {
  const auto now = io_.now();
  for (int r = 0; r < setup_.world_size; ++r) {
    const auto silent = Heartbeat::silence_since(shims_.heard(r), now);
    if (shims_.linked(r) && !supervisor_.exited(r) && silent > silence) {
      const long long seconds = std::chrono::duration_cast<std::chrono::seconds>(silent).count();
      lose_rank(r, "no word from its shim for " + std::to_string(seconds) + " s: a cut link or a dead host");
    }
  }
}

// Heartbeats out to every linked shim, and the silent ones declared lost (when a backend
// process runs the ranks behind shims); so are ranks whose shims never said hello in time.
void SupervisionLoop::heartbeat() {
  if (backend_pid_ <= 0) return;
  const auto now = io_.now();
  if (beat_.beat_due(now)) shims_.send_heartbeats();
  lose_silent_hosts(setup_.options.heartbeat_timeout);
  // An elastic launch must learn which host cannot start its ranks, where mpirun would wait.
  const auto start_bound = std::max<std::chrono::milliseconds>(setup_.options.heartbeat_timeout, kShimsStartWithin);
  if (setup_.options.min_hosts == 0 || supervisor_.tearing_down() || now - started_at_ <= start_bound) return;
  for (int r = 0; r < setup_.world_size; ++r) {
    if (!shims_.said_hello(r) && !supervisor_.exited(r))
      lose_rank(r, "its shim did not start within " +
                       std::to_string(std::chrono::duration_cast<std::chrono::seconds>(start_bound).count()) + " s");
  }
}

// Returns true when the channel reached its end (or must close).
bool SupervisionLoop::read_channel(Channel& ch) {
  char buf[65536];
  const long n = io_.read(ch.fd, buf, sizeof buf);
  if (n < 0) return false;  // nothing now
  if (n == 0) {
    if (!ch.shim)
      router_.finish(ch.rank, ch.stream);
    else
      shims_.ended(ch);
    return true;
  }
  if (!ch.shim) {
    router_.feed(ch.rank, ch.stream, buf, static_cast<size_t>(n));
    return false;
  }
  return shims_.take(ch, buf, static_cast<size_t>(n));
}

void SupervisionLoop::accept_shims() {
  for (int i = 0; i < kShimAcceptsPerWake; ++i) {
    const int fd = io_.accept(listen_fd_);
    if (fd < 0) return;
    auto c = std::make_unique<Channel>();
    c->fd = fd;
    shims_.greet(*c);
    channels_.push_back(std::move(c));
  }
}

// Connections to the shims' listener that did not say hello in time, and the oldest of them
// beyond kMaxShimsAwaitingHello: strangers, closed without a word.
void SupervisionLoop::drop_strangers() {
  const auto now = io_.now();
  size_t waiting = 0;
  for (const auto& c : channels_) waiting += c->shim && !c->hello;
  for (size_t i = 0; i < channels_.size();) {
    Channel& c = *channels_[i];
    if (c.shim && !c.hello && (waiting > kMaxShimsAwaitingHello || now - c.opened > kShimHelloWithin)) {
      --waiting;
      ++strangers_;
      io_.close(c.fd);
      channels_.erase(channels_.begin() + static_cast<long>(i));
    } else {
      ++i;
    }
  }
}

// Polls channels (and the listener/signals) once for at most `timeout`.
void SupervisionLoop::poll_once(std::chrono::milliseconds timeout) {
  std::vector<pollfd> fds;
  fds.push_back({io_.signal_fd(), POLLIN, 0});
  fds.push_back({listen_fd_, POLLIN, 0});
  for (auto& c : channels_) fds.push_back({c->fd, POLLIN, 0});
  // Our own stdout/stderr, when bytes wait for a slow reader: they are written as the
  // reader takes them, never blocking this loop.
  for (const pollfd& out : sink_.pollfds()) fds.push_back(out);
  int n = io_.poll(fds, timeout);
  sink_.flush_ready();
  if (n <= 0) return;
  if (fds[0].revents) {
    for (int sig : io_.take_signals()) {
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
      if (shims_.hosts()[static_cast<size_t>(ch.rank)] == host_name())
        lose_silent_hosts(setup_.options.heartbeat_timeout / kSilenceShareOnShimClose);
      lose_rank(ch.rank, "its shim's connection to nano-run closed");
    }
    if (ch.shim && !ch.hello) ++strangers_;
    shims_.forget(channels_[*it].get());
    io_.close(channels_[*it]->fd);
    channels_.erase(channels_.begin() + static_cast<long>(*it));
  }
  if (listen_fd_ >= 0 && fds[1].revents) accept_shims();
}

// Once LaunchOptions::stop_at_checkpoint_when says so, every rank is asked to stop at its next
// checkpoint, and asked again every kRejoinAskEvery: a rank that had not set up its checkpoints
// yet ignored the signal.
void SupervisionLoop::ask_to_stop_at_checkpoint() {
  if (!setup_.options.stop_at_checkpoint_when || supervisor_.tearing_down()) return;
  if (!stop_asked_) {
    if (!setup_.options.stop_at_checkpoint_when()) return;
    stop_asked_ = true;
    router_.note("nano-run: asking the ranks to stop at their next checkpoint, where the world changes");
  } else if (io_.now() - last_stop_ask_ < kRejoinAskEvery) {
    return;
  }
  last_stop_ask_ = io_.now();
  deliver(contract::kStopAtCheckpointSignal);
}

bool SupervisionLoop::reap() {
  bool any_running = false;
  for (auto& c : children_) {
    if (!c.running) continue;
    if (const std::optional<ProcessEnd> end = io_.reap(c.pid)) {
      c.running = false;
      if (c.rank >= 0) {
        rank_ended(c.rank, end->exit_code, end->signal);
      } else {
        drain();  // the shims' last frames (their exit statuses) come before mpirun's verdict
        const Decision d = supervisor_.backend_exited(end->exit_code, end->signal);
        if (d.announce) router_.note("nano-run: mpirun " + describe_end(end->exit_code, end->signal));
        apply(d);
      }
    } else {
      any_running = true;
    }
  }
  return any_running;
}

void SupervisionLoop::drain() {
  const auto until = io_.now() + kFinalDrain;
  while (!channels_.empty() && io_.now() < until) poll_once(kFinalDrainPollInterval);
}

void SupervisionLoop::loop() {
  while (reap()) {
    std::chrono::milliseconds timeout = kPollInterval;
    if (mpirun_deadline_ && io_.now() >= *mpirun_deadline_) {
      // mpirun did not end after its ranks did (or after they were killed): end it.
      io_.signal_group(backend_pid_, SIGKILL);
      mpirun_deadline_.reset();
    }
    if (deadline_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline_ - io_.now());
      if (left.count() <= 0) {
        router_.note("nano-run: grace period over; killing the remaining ranks");
        apply(supervisor_.grace_expired());
        deadline_.reset();
      } else {
        timeout = std::min(left, timeout);
      }
    }
    if (settle_deadline_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*settle_deadline_ - io_.now());
      if (left.count() <= 0) {
        supervisor_.settled();
        settle_deadline_.reset();
      } else {
        timeout = std::min(left, timeout);
      }
    }
    if (setup_.options.stop_when && !supervisor_.tearing_down() && setup_.options.stop_when()) {
      apply(supervisor_.stop_requested());
    }
    ask_to_stop_at_checkpoint();
    poll_once(timeout);
    drop_strangers();
    heartbeat();
  }
  drain();
  for (auto& c : channels_) {
    if (c->shim && !c->hello) ++strangers_;
    io_.close(c->fd);
  }
  channels_.clear();
}

LaunchResult SupervisionLoop::finish() {
  LaunchResult result;
  result.exit_code = supervisor_.exit_code();
  result.interrupted_by = supervisor_.interrupted_by();
  result.stopped = supervisor_.stopped();
  EndFacts facts;
  facts.root_cause = supervisor_.root_cause();
  facts.interrupted_by = result.interrupted_by;
  facts.exit_code = result.exit_code;
  facts.rank_offset = setup_.rank_offset;
  facts.hosts = hosts_by_rank();
  facts.lost = lost_;
  facts.elastic = setup_.options.min_hosts > 0;
  for (int r = 0; r < setup_.world_size; ++r) facts.started.push_back(shims_.said_hello(r));
  facts.ends = ends_;
  facts.this_host = host_name();
  facts.restart_follows =
      should_restart(result.exit_code, result.interrupted_by, setup_.restart_count, setup_.options.max_restarts);
  if (facts.root_cause) facts.stderr_tail = router_.stderr_tail(facts.root_cause->rank);
  if (facts.root_cause && facts.root_cause->rank >= 0) {
    // The root cause's torchelastic error file: read here for ranks nano-run forked; a shim
    // read it on the rank's own host and sent it.
    const int rank = facts.root_cause->rank;
    if (setup_.backend == LaunchBackend::kMpi)
      facts.error_file = shims_.error_file(rank);
    else if (!setup_.job_id.empty())
      facts.error_file = read_error_file(error_file_path(attempt_of(setup_), setup_.rank_offset + rank)).value_or("");
  }
  if (strangers_ > 0)
    router_.note("nano-run: turned away " + std::to_string(strangers_) +
                 " connection(s) to the shims' listener that did not answer the attempt's challenge");
  // The ranks did what they were asked: a planned end, no failure to report.
  if (stop_asked_ && facts.root_cause && facts.root_cause->signal == 0 &&
      facts.root_cause->exit_code == contract::kStoppedAtCheckpointExitCode) {
    router_.note("nano-run: the ranks stopped at their checkpoint, as asked");
    result.stopped_at_checkpoint = true;
    return result;
  }
  EndReport report = report_end(facts);
  for (const auto& line : report.lines) router_.note(line);
  result.failure = report.failure;
  // Which hosts this attempt lost: for an elastic launch's judgement (one host: none to lose).
  if (setup_.backend == LaunchBackend::kMpi && !setup_.hosts.empty()) result.lost_hosts = hosts_lost(facts);
  return result;
}

}  // namespace nano
