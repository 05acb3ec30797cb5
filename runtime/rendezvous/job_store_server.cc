#include "runtime/rendezvous/job_store_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <nano/error.h>
#include "core/job_secret.h"
#include "runtime/rendezvous/store_wire.h"

namespace nano {

using Clock = std::chrono::steady_clock;

struct JobStoreServer::Connection {
  int fd = -1;
  int id = 0;
  bool member = false;
  Clock::time_point since;
  std::string challenge;
  StoreMessageReader reader{0};
  std::string out;  // bytes still to send
  bool closed = false;
};

struct JobStoreServer::State {
  StoreState store;
};

namespace {

// How often the loop wakes with nothing to do, to close strangers that did not answer in time.
constexpr int kIdleWakeMs = 100;
// Connections taken from the backlog per wake: a flood cannot keep the loop from serving
// members' requests.
constexpr int kAcceptsPerWake = 256;

int listen_every_interface(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) throw Error(std::string("socket: ") + std::strerror(errno));
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd, 512) != 0) {
    const int err = errno;
    close(fd);
    throw Error(std::strerror(err));
  }
  return fd;
}

}  // namespace

JobStoreServer::JobStoreServer(int port, std::string secret, StoreServerLimits limits)
    : secret_(std::move(secret)), limits_(limits), port_(port), state_(std::make_unique<State>()) {
  try {
    listen_fd_ = listen_every_interface(port);
  } catch (const Error& e) {
    throw Error("nano: cannot host the rendezvous store on *:" + std::to_string(port) + ": " + e.what());
  }
  if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    close(listen_fd_);
    throw Error(std::string("nano: cannot host the rendezvous store: pipe: ") + std::strerror(errno));
  }
  thread_ = std::thread([this] { serve(); });
}

JobStoreServer::~JobStoreServer() {
  stop_ = true;
  const char byte = 0;
  if (write(wake_[1], &byte, 1) < 0) {
    // The pipe is ours and empty; the loop also wakes within kIdleWakeMs on its own.
  }
  thread_.join();
  for (auto& c : connections_) close(c->fd);
  close(listen_fd_);
  close(wake_[0]);
  close(wake_[1]);
}

void JobStoreServer::count(size_t StoreServerCounts::*which) {
  std::lock_guard<std::mutex> lock(counts_mutex_);
  ++(counts_.*which);
}

StoreServerCounts JobStoreServer::counts() const {
  std::lock_guard<std::mutex> lock(counts_mutex_);
  return counts_;
}

void JobStoreServer::serve() {
  while (!stop_) {
    std::vector<pollfd> fds = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (auto& c : connections_) fds.push_back({c->fd, static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
    if (poll(fds.data(), fds.size(), kIdleWakeMs) < 0 && errno != EINTR) break;
    if (stop_) break;
    for (size_t i = 2; i < fds.size(); ++i) {
      Connection& c = *connections_[i - 2];
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) take(c);
      if (!c.closed && (fds[i].revents & POLLOUT)) flush(c);
    }
    if (fds[1].revents & POLLIN) accept_all();
    close_late_and_crowded();
    connections_.erase(std::remove_if(connections_.begin(), connections_.end(),
                                      [](const std::unique_ptr<Connection>& c) { return c->closed; }),
                       connections_.end());
  }
}

void JobStoreServer::accept_all() {
  for (int i = 0; i < kAcceptsPerWake; ++i) {
    sockaddr_in peer{};
    socklen_t size = sizeof peer;
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&peer), &size, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN: none left; anything else: try again at the next wake
    const int on = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    auto c = std::make_unique<Connection>();
    c->fd = fd;
    c->id = next_id_++;
    c->since = Clock::now();
    c->challenge = make_challenge();
    c->reader.set_max_frame(limits_.max_frame_before_answer);
    send(*c, {kStoreGreeting, c->challenge});
    connections_.push_back(std::move(c));
  }
}

void JobStoreServer::take(Connection& c) {
  char buffer[65536];
  const ssize_t n = recv(c.fd, buffer, sizeof buffer, 0);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    if (!c.member) count(&StoreServerCounts::wrong);
    close_connection(c);
    return;
  }
  c.reader.feed(buffer, static_cast<size_t>(n));
  try {
    while (!c.closed) {
      auto message = c.reader.next();
      if (!message) break;
      if (c.member) {
        answer(c, *message);
      } else if (!admit(c, *message)) {
        count(&StoreServerCounts::wrong);
        close_connection(c);
      }
    }
  } catch (const Error&) {
    // Bytes that are no frame (too long, cut short): a stranger's or a broken peer's.
    if (!c.member) count(&StoreServerCounts::wrong);
    close_connection(c);
  }
}

bool JobStoreServer::admit(Connection& c, const std::vector<std::string>& message) {
  // [the answer to our challenge, the peer's own challenge to us]
  if (message.size() != 2 || message[1].size() != 16 ||
      !is_right_answer(message[0], secret_, kStoreClientProof, c.challenge))
    return false;
  c.member = true;
  c.reader.set_max_frame(limits_.max_frame);
  count(&StoreServerCounts::members);
  send(c, {"ok", answer_challenge(secret_, kStoreServerProof, message[1])});
  return true;
}

void JobStoreServer::answer(Connection& c, const std::vector<std::string>& request) {
  if (auto reply = state_->store.answer(c.id, request)) send(c, *reply);
  for (auto& [id, reply] : state_->store.take_ready())
    for (auto& other : connections_)
      if (other->id == id && !other->closed) send(*other, reply);
}

void JobStoreServer::send(Connection& c, const std::vector<std::string>& message) {
  c.out += encode_store_message(message);
  flush(c);
}

void JobStoreServer::flush(Connection& c) {
  while (!c.out.empty()) {
    const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;  // the rest goes when the socket has room (POLLOUT)
    if (n < 0) {
      close_connection(c);
      return;
    }
    c.out.erase(0, static_cast<size_t>(n));
  }
}

void JobStoreServer::close_connection(Connection& c) {
  if (c.closed) return;
  state_->store.forget(c.id);
  close(c.fd);
  c.fd = -1;
  c.closed = true;
}

void JobStoreServer::close_late_and_crowded() {
  const auto now = Clock::now();
  std::vector<Connection*> strangers;
  for (auto& c : connections_) {
    if (c->closed || c->member) continue;
    if (now - c->since > limits_.answer_within) {
      count(&StoreServerCounts::late);  // counted before the peer can see the close
      close_connection(*c);
      continue;
    }
    strangers.push_back(c.get());
  }
  // connections_ is in arrival order, so the oldest strangers come first.
  for (size_t i = 0; strangers.size() - i > limits_.max_strangers; ++i) {
    count(&StoreServerCounts::crowded);
    close_connection(*strangers[i]);
  }
}

}  // namespace nano
