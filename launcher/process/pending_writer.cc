#include "launcher/process/pending_writer.h"

#include <errno.h>
#include <limits.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "launcher/process/timeouts.h"

namespace nano {

PendingWriter::PendingWriter(int fd, std::size_t limit) : fd_(fd), limit_(limit) {
  struct stat st {};
  if (fstat(fd, &st) == 0) {
    if (S_ISFIFO(st.st_mode))
      kind_ = Kind::kPipe;
    else if (S_ISSOCK(st.st_mode))
      kind_ = Kind::kSocket;
  } else {
    closed_ = true;  // nothing to write to (a closed descriptor)
  }
}

void PendingWriter::write(const std::string& bytes) {
  if (closed_) {
    dropped_ += bytes.size();
    return;
  }
  if (!queue_.empty() && queued_ + bytes.size() > limit_) {
    dropped_ += bytes.size();
    return;
  }
  queue_.push_back(bytes);
  queued_ += bytes.size();
  flush_ready();
}

bool PendingWriter::write_some() {
  const std::string& front = queue_.front();
  const char* p = front.data() + offset_;
  std::size_t left = front.size() - offset_;
  ssize_t n;
  if (kind_ == Kind::kSocket) {
    n = send(fd_, p, left, MSG_DONTWAIT | MSG_NOSIGNAL);
  } else {
    pollfd ready{fd_, POLLOUT, 0};
    if (poll(&ready, 1, 0) != 1) return false;
    if (ready.revents & (POLLERR | POLLNVAL)) {
      n = -1;
      errno = EPIPE;
    } else {
      // A pipe that polls writable takes PIPE_BUF bytes at once; more could block.
      n = ::write(fd_, p, kind_ == Kind::kPipe ? std::min<std::size_t>(left, PIPE_BUF) : left);
    }
  }
  if (n < 0) {
    if (errno == EINTR) return true;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
    closed_ = true;  // EPIPE and the like: the reader is gone for good
    dropped_ += queued_ - offset_;
    queue_.clear();
    queued_ = offset_ = 0;
    return false;
  }
  offset_ += static_cast<std::size_t>(n);
  if (offset_ == front.size()) {
    queued_ -= front.size();
    queue_.pop_front();
    offset_ = 0;
  }
  return true;
}

void PendingWriter::flush_ready() {
  while (!queue_.empty() && write_some()) {
  }
}

void PendingWriter::drain(std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!queue_.empty()) {
    flush_ready();
    if (queue_.empty()) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd ready{fd_, POLLOUT, 0};
    poll(&ready, 1, static_cast<int>(std::min(left, kPollInterval).count()));
  }
  dropped_ += queued_ - offset_;
  queue_.clear();
  queued_ = offset_ = 0;
}

}  // namespace nano
