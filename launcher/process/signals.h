#pragma once
// Signals as readable events: a self-pipe that SIGINT/SIGTERM/SIGHUP/SIGCHLD write into, so
// the supervision loop handles them in poll() like any other input. Scoped: the previous
// handlers come back when it is destroyed (the launcher runs inside user programs too).
#include <csignal>
#include <string>
#include <vector>

namespace nano {

/// A signal's name as nano's reports print it: "SIGKILL", "SIGSEGV", ...; "signal N" for one
/// without a name (real-time signals). The one table behind nano-run's root-cause lines and the
/// in-program launch's errors, which tests and users match as text.
std::string signal_name(int sig);

class SignalPipe {
 public:
  /// Installs handlers for `signals`. Only one SignalPipe may exist at a time.
  explicit SignalPipe(const std::vector<int>& signals);
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  /// The read end to poll.
  int fd() const { return read_fd_; }
  /// Signals received since the last call, in order.
  std::vector<int> take();

 private:
  int read_fd_ = -1;
  std::vector<int> signals_;
  std::vector<struct sigaction> previous_;
};

}  // namespace nano
