#include "runtime/rendezvous/job_store.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

#include <nano/error.h>
#include "core/job_secret.h"
#include "runtime/rendezvous/job_store_server.h"
#include "runtime/rendezvous/store_wire.h"

namespace nano {

using Clock = std::chrono::steady_clock;

namespace {

// How long a refused connection waits before the next try while rank 0's server is not up.
constexpr std::chrono::milliseconds kRetryConnect{50};
// The largest frame taken from the server before it proved it knows the job's secret: the
// greeting and the proof are a few dozen bytes, so whoever holds the port (a stranger, another
// job's store) cannot make a rank buffer more than this. A proven server gets the members' bound.
constexpr size_t kMaxFrameBeforeProof = 4096;

std::string seconds_text(std::chrono::milliseconds ms) {
  std::ostringstream out;
  out << ms.count() / 1000.0;
  return out.str();
}

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::max<long long>(0, std::min<long long>(left, 1 << 30)));
}

// Raised inside a link when the peer or the deadline ended it; the store words it.
struct LinkBroken {
  std::string why;
  bool timed_out = false;
  bool not_a_frame = false;  // bytes that are no store frame (too long, cut short)
};

}  // namespace

// One connection to the server, admitted through the handshake.
struct JobStore::Link {
  int fd = -1;
  StoreMessageReader reader{kMaxFrameBeforeProof};

  ~Link() {
    if (fd >= 0) close(fd);
  }

  void write_all(const std::string& bytes, Clock::time_point deadline) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN) throw LinkBroken{std::strerror(errno)};
      pollfd p{fd, POLLOUT, 0};
      if (poll(&p, 1, remaining_ms(deadline)) == 0) throw LinkBroken{"timed out", true};
    }
  }

  std::vector<std::string> read_message(Clock::time_point deadline) {
    for (;;) {
      try {
        if (auto message = reader.next()) return *message;
      } catch (const Error& e) {
        throw LinkBroken{e.what(), false, true};
      }
      pollfd p{fd, POLLIN, 0};
      const int ready = poll(&p, 1, remaining_ms(deadline));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) throw LinkBroken{"timed out", true};
      char buffer[65536];
      const ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n == 0) throw LinkBroken{"closed by the server"};
      if (n < 0) throw LinkBroken{std::strerror(errno)};
      reader.feed(buffer, static_cast<size_t>(n));
    }
  }
};

namespace {

int connect_once(const std::string& host, int port, Clock::time_point deadline, std::string& why) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    why = std::string("cannot resolve: ") + gai_strerror(rc);
    return -1;
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int result = fd < 0 ? -1 : connect(fd, found->ai_addr, found->ai_addrlen);
  freeaddrinfo(found);
  if (fd < 0) {
    why = std::strerror(errno);
    return -1;
  }
  if (result != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, remaining_ms(deadline)) == 1) {
      int error = 0;
      socklen_t size = sizeof error;
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size);
      result = error == 0 ? 0 : -1;
      errno = error;
    } else {
      errno = ETIMEDOUT;
    }
  }
  if (result != 0) {
    why = std::strerror(errno);
    close(fd);
    return -1;
  }
  const int on = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
  return fd;
}

}  // namespace

JobStore::JobStore(std::string host, int port, std::string secret, std::chrono::milliseconds timeout,
                   std::shared_ptr<JobStoreServer> server)
    : c10d::Store(timeout), endpoint_{std::move(host), port, std::move(secret)}, server_(std::move(server)) {
  std::lock_guard<std::mutex> lock(mutex_);
  request_locked({"count"}, timeout_);  // connects and proves both sides now, not at first use
}

JobStore::~JobStore() {
  if (!server_ || server_.use_count() > 1) return;  // the server's last owner tells
  const StoreServerCounts c = server_->counts();
  const size_t turned_away = c.wrong + c.late + c.crowded;
  if (turned_away > 0)
    std::cerr << "nano: the job store on *:" << endpoint_.port << " turned away " << turned_away
              << " connection(s) that did not answer its challenge (" << c.wrong << " wrong, " << c.late << " silent, "
              << c.crowded << " beyond the " << StoreServerLimits{}.max_strangers << " waiting at once)" << std::endl;
}

std::string JobStore::where() const { return endpoint_.host + ":" + std::to_string(endpoint_.port); }

std::vector<std::string> JobStore::request(const std::vector<std::string>& message, std::chrono::milliseconds bound) {
  std::lock_guard<std::mutex> lock(mutex_);
  return request_locked(message, bound);
}

std::unique_ptr<JobStore::Link> JobStore::connect(std::chrono::milliseconds bound) {
  const auto deadline = Clock::now() + bound;
  // Retried while rank 0's server is not listening yet.
  std::string why;
  int fd = -1;
  while ((fd = connect_once(endpoint_.host, endpoint_.port, deadline, why)) < 0) {
    if (Clock::now() + kRetryConnect >= deadline)
      throw Error("nano: rendezvous at " + where() + " timed out after " + seconds_text(bound) +
                  " s: the store host (rank 0) did not answer (" + why + ")");
    std::this_thread::sleep_for(kRetryConnect);
  }
  auto link = std::make_unique<Link>();
  link->fd = fd;
  // The handshake: the server's challenge answered, ours answered by the server.
  try {
    const auto greeting = link->read_message(deadline);
    if (greeting.size() != 2 || greeting[0] != kStoreGreeting)
      throw Error("nano: " + where() + " is not a nano job store (its greeting is not nano's)");
    const std::string ours = make_challenge();
    link->write_all(encode_store_message({answer_challenge(endpoint_.secret, kStoreClientProof, greeting[1]), ours}),
                    deadline);
    const auto proof = link->read_message(deadline);
    if (proof.size() != 2 || proof[0] != "ok" || !is_right_answer(proof[1], endpoint_.secret, kStoreServerProof, ours))
      throw Error("nano: the store at " + where() +
                  " could not prove it belongs to this job (its answer to our challenge is wrong): another job's "
                  "store holds the port");
    link->reader.set_max_frame(StoreServerLimits{}.max_frame);
  } catch (const LinkBroken& broken) {
    if (broken.timed_out)
      throw Error("nano: rendezvous at " + where() + " timed out after " + seconds_text(bound) +
                  " s: the store did not finish the handshake");
    if (broken.not_a_frame)
      throw Error("nano: " + where() + " is not this job's store: before proving it knows the job's secret, it sent " +
                  broken.why);
    throw Error("nano: the store at " + where() + " refused this rank (" + broken.why +
                "): it belongs to another job, or " + kJobSecretVariable + " differs");
  }
  return link;
}

std::vector<std::string> JobStore::request_locked(const std::vector<std::string>& message,
                                                  std::chrono::milliseconds bound) {
  if (!link_) link_ = connect(bound);
  const auto deadline = Clock::now() + bound;
  try {
    link_->write_all(encode_store_message(message), deadline);
    auto reply = link_->read_message(deadline);
    if (reply.empty()) throw LinkBroken{"an empty answer"};
    if (reply[0] == "error") throw Error("nano: store at " + where() + ": " + (reply.size() > 1 ? reply[1] : ""));
    return reply;
  } catch (const LinkBroken& broken) {
    link_.reset();
    if (broken.timed_out) {
      std::string keys;
      for (size_t i = 1; i < message.size() && i < 4; ++i) keys += (i > 1 ? ", '" : "'") + message[i] + "'";
      throw Error("nano: store at " + where() + ": " + message[0] + (keys.empty() ? "" : " " + keys) +
                  " timed out after " + seconds_text(bound) + " s");
    }
    throw Error("nano: store at " + where() + ": " + broken.why);
  }
}

namespace {

std::string text_of(const std::vector<uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); }
std::vector<uint8_t> bytes_of(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

}  // namespace

void JobStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  request({"set", key, text_of(value)}, timeout_);
}

std::vector<uint8_t> JobStore::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                          const std::vector<uint8_t>& desired) {
  return bytes_of(request({"cas", key, text_of(expected), text_of(desired)}, timeout_).at(1));
}

std::vector<uint8_t> JobStore::get(const std::string& key) {
  wait({key}, timeout_);
  const auto reply = request({"get", key}, timeout_);
  if (reply[0] != "ok") throw Error("nano: store at " + where() + ": key '" + key + "' was deleted while read");
  return bytes_of(reply.at(1));
}

int64_t JobStore::add(const std::string& key, int64_t value) {
  return std::stoll(request({"add", key, std::to_string(value)}, timeout_).at(1));
}

bool JobStore::deleteKey(const std::string& key) { return request({"delete", key}, timeout_).at(1) == "1"; }

bool JobStore::check(const std::vector<std::string>& keys) {
  std::vector<std::string> message{"check"};
  message.insert(message.end(), keys.begin(), keys.end());
  return request(message, timeout_).at(1) == "1";
}

int64_t JobStore::getNumKeys() { return std::stoll(request({"count"}, timeout_).at(1)); }

void JobStore::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void JobStore::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  std::vector<std::string> message{"wait"};
  message.insert(message.end(), keys.begin(), keys.end());
  // c10d's kNoTimeout (0) waits for as long as the store's own timeout: every wait has a bound.
  request(message, timeout.count() > 0 ? timeout : timeout_);
}

#if TORCH_VERSION_MAJOR >= 2
void JobStore::append(const std::string& key, const std::vector<uint8_t>& value) {
  request({"append", key, text_of(value)}, timeout_);
}
#endif

c10::intrusive_ptr<c10d::Store> JobStore::clone() {
  return c10::make_intrusive<JobStore>(endpoint_.host, endpoint_.port, endpoint_.secret, timeout_, server_);
}

}  // namespace nano
