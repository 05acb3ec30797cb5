#include "launcher/mpi/shim_loop.h"

#include <signal.h>

#include <algorithm>
#include <climits>

#include "core/parse.h"
#include "launcher/process/timeouts.h"

namespace nano {

ShimLoop::ShimLoop(const ShimLoopSetup& setup, FrameDecoder& from_launcher, SupervisionIo& io,
                   std::function<void(const ProcessEnd&)> report)
    : setup_(setup),
      from_launcher_(from_launcher),
      io_(io),
      report_(std::move(report)),
      heartbeat_(setup.heartbeat_timeout, io.now()),
      open_(setup.output) {}

ShimLoopEnd ShimLoop::run() {
  read_link_frames();
  while (end_.abandoned == ShimAbandon::kNone && (!exited_ || !open_.empty() || (linked() && !released_))) {
    std::vector<pollfd> fds = {{io_.signal_fd(), POLLIN, 0}, {setup_.link, POLLIN, 0}};
    for (int fd : open_) fds.push_back({fd, POLLIN, 0});
    io_.poll(fds, kShimPollInterval);
    // No descriptor tells that the parent went: it is looked at on every wake.
    if (io_.parent() != setup_.parent) {
      give_up(ShimAbandon::kParentGone);
      break;
    }
    if (linked()) keep_heartbeat();
    if (end_.abandoned != ShimAbandon::kNone) break;
    for (int sig : io_.take_signals())
      if (sig != SIGCHLD) deliver(sig);  // from mpirun or orted itself
    if (fds[1].revents) read_link();
    if (end_.abandoned != ShimAbandon::kNone) break;
    for (size_t i = 2; i < fds.size(); ++i)
      if (fds[i].revents) forward_output(fds[i].fd);
    if (!exited_) {
      if (const std::optional<ProcessEnd> end = io_.reap(setup_.rank)) {
        exited_ = true;
        end_.rank = *end;
        io_.signal_group(setup_.rank, SIGKILL);  // no leftover of the rank's group holds its pipes open
      }
    }
    if (exited_ && open_.empty() && !reported_) {
      reported_ = true;
      if (report_) report_(end_.rank);
    }
  }
  return end_;
}

void ShimLoop::send(FrameType type, const std::string& payload) {
  if (linked())
    io_.write_whole(setup_.link, encode_frame(type, payload));
  else
    io_.write_whole(type == FrameType::kOut ? 1 : 2, payload);
}

void ShimLoop::deliver(int sig) {
  if (exited_) return;
  io_.signal_group(setup_.rank, sig);
  // A stopped rank acts on SIGTERM or SIGINT only once continued.
  if (sig != SIGKILL && sig != SIGCONT) io_.signal_group(setup_.rank, SIGCONT);
}

void ShimLoop::keep_heartbeat() {
  const auto now = io_.now();
  if (heartbeat_.beat_due(now)) send(FrameType::kHeartbeat, "");
  if (!heartbeat_.lost(now)) return;
  end_.silence = heartbeat_.silence(now);
  give_up(ShimAbandon::kLauncherSilent);
}

// nano-run's frames: signals to deliver, the release.
void ShimLoop::read_link() {
  char buffer[4096];
  const long n = io_.read(setup_.link, buffer, sizeof buffer);
  if (n == 0) {
    give_up(ShimAbandon::kLauncherGone);
    return;
  }
  if (n < 0) return;
  heartbeat_.heard(io_.now());
  from_launcher_.feed(buffer, static_cast<size_t>(n));
  read_link_frames();
}

void ShimLoop::read_link_frames() {
  FrameType type;
  std::string payload;
  try {
    while (from_launcher_.next(type, payload)) {
      if (type == FrameType::kSignal)
        deliver(static_cast<int>(parse_integer(payload, 0, 64).value_or(0)));
      else if (type == FrameType::kRelease)
        released_ = true;
    }
  } catch (const Error&) {
    give_up(ShimAbandon::kLauncherGone);  // bytes that are no frame: not nano-run's
  }
}

void ShimLoop::forward_output(int fd) {
  char buffer[65536];
  const long n = io_.read(fd, buffer, sizeof buffer);
  if (n < 0) return;
  if (n > 0) {
    send(fd == setup_.stdout_fd ? FrameType::kOut : FrameType::kErr, std::string(buffer, static_cast<size_t>(n)));
    return;
  }
  io_.close(fd);
  open_.erase(std::find(open_.begin(), open_.end(), fd));
}

void ShimLoop::give_up(ShimAbandon why) {
  io_.signal_group(setup_.rank, SIGKILL);
  end_.abandoned = why;
}

bool is_open_mpi_parent(const std::string& comm) {
  // Open MPI 4's daemon and launcher, Open MPI 5's (PRRTE's).
  for (const char* name : {"orted", "mpirun", "mpiexec", "prted", "prterun", "prte"})
    if (comm == name) return true;
  return false;
}

}  // namespace nano
