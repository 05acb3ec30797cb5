#include "launcher/process/frames.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <sstream>

#include <nano/error.h>
#include "core/job_secret.h"

namespace nano {

std::string encode_frame(FrameType type, const std::string& payload) {
  std::string out;
  out.reserve(payload.size() + 5);
  out.push_back(static_cast<char>(type));
  uint32_t n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out += payload;
  return out;
}

bool write_all(int fd, const std::string& bytes, std::optional<std::chrono::milliseconds> wait) {
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + wait.value_or(std::chrono::milliseconds(0));
  const char* p = bytes.data();
  size_t left = bytes.size();
  bool socket = true;  // until send() says otherwise (a pipe, a file: the unlinked shim's output)
  while (fd >= 0 && left > 0) {
    const ssize_t n = socket ? ::send(fd, p, left, MSG_NOSIGNAL | (wait ? MSG_DONTWAIT : 0)) : ::write(fd, p, left);
    if (n > 0) {
      p += n;
      left -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == ENOTSOCK && socket) {
      socket = false;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait) {
      const auto room = std::chrono::ceil<std::chrono::milliseconds>(until - Clock::now()).count();
      if (room <= 0) return false;
      pollfd ready{fd, POLLOUT, 0};
      poll(&ready, 1, static_cast<int>(room));
      continue;
    }
    return false;
  }
  return left == 0;
}

void FrameDecoder::feed(const char* data, size_t size) { buffer_.append(data, size); }

bool FrameDecoder::next(FrameType& type, std::string& payload) {
  if (buffer_.size() < 5) return false;
  char t = buffer_[0];
  if (std::string("chsoexftkrb").find(t) == std::string::npos)
    throw Error("bad frame type " + std::to_string(static_cast<int>(static_cast<unsigned char>(t))) +
                " on a rank shim link");
  uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<uint32_t>(static_cast<unsigned char>(buffer_[1 + i])) << (8 * i);
  if (n > max_payload_) throw Error("oversized frame (" + std::to_string(n) + " bytes) on a rank shim link");
  if (buffer_.size() < 5 + static_cast<size_t>(n)) return false;
  type = static_cast<FrameType>(t);
  payload = buffer_.substr(5, n);
  buffer_.erase(0, 5 + static_cast<size_t>(n));
  return true;
}

namespace {

std::string shim_link_purpose(int rank) { return "shim-link rank " + std::to_string(rank); }

}  // namespace

std::string shim_answer(const std::string& secret, const std::string& challenge, int rank) {
  return hex_of(answer_challenge(secret, shim_link_purpose(rank), challenge));
}

bool is_right_shim_answer(const std::string& answer, const std::string& secret, const std::string& challenge,
                          int rank) {
  const std::optional<std::string> bytes = bytes_of_hex(answer);
  return bytes && is_right_answer(*bytes, secret, shim_link_purpose(rank), challenge);
}

std::string hello_payload(int rank, const std::string& host, const std::string& answer) {
  return std::to_string(rank) + " " + host + " " + answer;
}

bool parse_hello(const std::string& payload, int& rank, std::string& host, std::string& answer) {
  std::istringstream in(payload);
  return static_cast<bool>(in >> rank >> host >> answer) && rank >= 0;
}

std::string exit_payload(int exit_code, int signal) { return std::to_string(exit_code) + " " + std::to_string(signal); }

bool parse_exit(const std::string& payload, int& exit_code, int& signal) {
  std::istringstream in(payload);
  return static_cast<bool>(in >> exit_code >> signal);
}

}  // namespace nano
