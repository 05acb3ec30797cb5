#include "launcher/process/signals.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <nano/error.h>

namespace nano {
namespace {

volatile int g_write_fd = -1;

void on_signal(int sig) {
  int saved = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  if (g_write_fd >= 0) {
    ssize_t ignored = write(g_write_fd, &byte, 1);
    (void)ignored;
  }
  errno = saved;
}

}  // namespace

std::string signal_name(int sig) {
  // glibc's own table (2.32+; Debian 12 has 2.36): the names match kill -l, without the SIG.
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? "SIG" + std::string(abbrev) : "signal " + std::to_string(sig);
}

SignalPipe::SignalPipe(const std::vector<int>& signals) : signals_(signals) {
  if (g_write_fd >= 0) throw Error("SignalPipe: only one may exist at a time");
  int fds[2];
  if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) throw Error(std::string("pipe: ") + strerror(errno));
  read_fd_ = fds[0];
  g_write_fd = fds[1];
  previous_.resize(signals.size());
  for (size_t i = 0; i < signals.size(); ++i) {
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART | (signals[i] == SIGCHLD ? SA_NOCLDSTOP : 0);
    sigaction(signals[i], &action, &previous_[i]);
  }
}

SignalPipe::~SignalPipe() {
  for (size_t i = 0; i < signals_.size(); ++i) sigaction(signals_[i], &previous_[i], nullptr);
  int w = g_write_fd;
  g_write_fd = -1;
  close(w);
  close(read_fd_);
}

std::vector<int> SignalPipe::take() {
  std::vector<int> out;
  unsigned char buf[64];
  for (;;) {
    ssize_t n = read(read_fd_, buf, sizeof buf);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) out.push_back(buf[i]);
  }
  return out;
}

}  // namespace nano
