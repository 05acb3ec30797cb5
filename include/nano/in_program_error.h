#pragma once
// The error an in-program launch (nano::TorchNano, nano::nano) throws in the calling process
// when one of its ranks fails.
#include <string>

#include <nano/error.h>

namespace nano {

/// A rank of an in-program launch failed; the other ranks have been stopped. `what()` is one
/// line: "nano: rank 1 (host h) exited with code 3" or "... was killed by SIGSEGV"; the
/// rank's last stderr lines are in stderr_tail (not in what()). rank -1: the launch ended
/// (mpirun failed, Ctrl-C: launch_exit_code 130) before any rank failed.
class RankFailedError : public Error {
 public:
  RankFailedError(int rank, std::string host, int exit_code, int signal, std::string stderr_tail, int launch_exit_code);
  int rank() const { return rank_; }  ///< -1: mpirun failed before any rank
  const std::string& host() const { return host_; }
  int exit_code() const { return exit_code_; }  ///< 0 when killed by a signal
  int signal() const { return signal_; }        ///< 0 when it exited
  const std::string& stderr_tail() const { return stderr_tail_; }
  int launch_exit_code() const { return launch_exit_code_; }  ///< nano-run's contract code

 private:
  int rank_;
  std::string host_;
  int exit_code_;
  int signal_;
  std::string stderr_tail_;
  int launch_exit_code_;
};

}  // namespace nano
