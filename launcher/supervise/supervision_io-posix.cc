// The supervision loop's system calls, each passed through as it is: no decision here.
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/process/frames.h"
#include "launcher/process/process_group.h"
#include "launcher/process/signals.h"
#include "launcher/process/subprocess.h"
#include "launcher/process/timeouts.h"
#include "launcher/supervise/supervision_io.h"

namespace nano {
namespace {

class SystemSupervisionIo : public SupervisionIo {
 public:
  explicit SystemSupervisionIo(OwnGroups* groups) : groups_(groups) {}

  void catch_signals() override {
    signals_ = std::make_unique<SignalPipe>(std::vector<int>{SIGINT, SIGTERM, SIGHUP, SIGCHLD});
  }
  void release_signals() override { signals_.reset(); }
  int signal_fd() override { return signals_ ? signals_->fd() : -1; }
  std::vector<int> take_signals() override { return signals_ ? signals_->take() : std::vector<int>{}; }

  int poll(std::vector<pollfd>& fds, std::chrono::milliseconds timeout) override {
    return ::poll(fds.data(), fds.size(), static_cast<int>(timeout.count()));
  }

  long read(int fd, char* buffer, size_t size) override {
    const ssize_t n = ::read(fd, buffer, size);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return -1;
    return n < 0 ? 0 : static_cast<long>(n);
  }

  bool send_frame(int fd, const std::string& frame) override { return write_all(fd, frame, kShimFrameWrite); }
  bool write_whole(int fd, const std::string& bytes) override { return write_all(fd, bytes); }

  int accept(int listen_fd) override {
    // Never waits: on a listener that does not block, an empty backlog is EAGAIN (-1).
    const int flags = fcntl(listen_fd, F_GETFL);
    if (flags >= 0 && !(flags & O_NONBLOCK)) fcntl(listen_fd, F_SETFL, flags | O_NONBLOCK);
    return accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  }
  void close(int fd) override { ::close(fd); }

  std::optional<ProcessEnd> reap(pid_t pid) override {
    int status;
    if (waitpid(pid, &status, WNOHANG) != pid) return std::nullopt;
    ProcessEnd end;
    decode_wait_status(status, end.exit_code, end.signal);
    return end;
  }
  void signal_group(pid_t pgid, int sig) override {
    if (groups_) groups_->signal(pgid, sig);
  }
  void watch_group(const GroupLeader& leader) override {
    if (groups_ && !groups_->holds(leader.pid)) groups_->add(OwnGroup::of_leader(leader));
  }

  Clock::time_point now() override { return Clock::now(); }
  pid_t parent() override { return getppid(); }

 private:
  OwnGroups* groups_;
  std::unique_ptr<SignalPipe> signals_;
};

}  // namespace

std::unique_ptr<SupervisionIo> make_system_supervision_io(OwnGroups* groups) {
  return std::make_unique<SystemSupervisionIo>(groups);
}

}  // namespace nano
