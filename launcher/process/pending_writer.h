#pragma once
// Writing to a descriptor we do not control (nano-run's stdout and stderr) without ever
// blocking: bytes queue up to a bound and go out only as fast as the reader takes them, so a
// stalled pager or a `| head` can never stop supervision. Past the bound, whole lines are
// dropped and counted; a reader that went away (EPIPE) drops everything from then on. The
// descriptor's flags are left alone (O_NONBLOCK on a shared terminal would leak to the shell):
// readiness comes from poll(), and writes to pipes stay within PIPE_BUF, which a pipe reported
// writable always accepts whole.
#include <poll.h>

#include <chrono>
#include <cstddef>
#include <deque>
#include <string>

namespace nano {

class PendingWriter {
 public:
  /// `fd`: where to write; `limit`: bytes held at most while the reader is slow.
  explicit PendingWriter(int fd, std::size_t limit = 16u << 20);

  /// Queues `bytes` (one whole line) and writes what the reader takes now. A line that does
  /// not fit under the limit is dropped whole (a line larger than the limit is still queued
  /// when nothing else is).
  void write(const std::string& bytes);
  /// True while bytes wait; poll() the descriptor for POLLOUT then.
  bool pending() const { return !queue_.empty(); }
  int fd() const { return fd_; }
  /// Writes what the reader takes without blocking.
  void flush_ready();
  /// At the end: keeps writing for at most `limit`, then drops the rest.
  void drain(std::chrono::milliseconds limit);
  /// Bytes that never reached the reader (dropped for the bound, after EPIPE, or at drain).
  std::size_t dropped() const { return dropped_; }
  /// True after the reader went away (EPIPE or another write error).
  bool closed() const { return closed_; }

 private:
  enum class Kind { kPipe, kSocket, kOther };
  bool write_some();  // false: nothing more can go now

  int fd_;
  std::size_t limit_;
  Kind kind_ = Kind::kOther;
  std::deque<std::string> queue_;
  std::size_t queued_ = 0;
  std::size_t offset_ = 0;  // into queue_.front()
  std::size_t dropped_ = 0;
  bool closed_ = false;
};

}  // namespace nano
