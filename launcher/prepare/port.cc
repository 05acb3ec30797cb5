#include "launcher/prepare/port.h"

#include <random>

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cstring>

#include <nano/error.h>
#include "launcher/source_filter/source_filter.h"

namespace nano {
namespace {

int bind_socket(uint32_t address, int port, bool reuse) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error(std::string("socket: ") + strerror(errno));
  if (reuse) {
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(address);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

int bound_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

}  // namespace

int pick_free_port() {
  // Below the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by default):
  // the port stays unused between this check and rank 0's bind, since the kernel never hands it
  // to another process's connect() or bind(0) meanwhile (an ephemeral one it may, and did).
  std::random_device rd;
  std::mt19937 pick(rd());
  std::uniform_int_distribution<int> below_ephemeral(20000, 32000);
  for (int attempt = 0; attempt < 64; ++attempt) {
    const int port = below_ephemeral(pick);
    const int fd = bind_socket(INADDR_ANY, port, true);
    if (fd < 0) continue;
    close(fd);
    return port;
  }
  int fd = bind_socket(INADDR_ANY, 0, false);
  if (fd < 0) throw Error(std::string("cannot pick a free port: ") + strerror(errno));
  int port = bound_port(fd);
  close(fd);
  return port;
}

std::string port_unusable_reason(int port) {
  // SO_REUSEADDR as the rendezvous server (c10d TCPStore, Gloo) uses it: a port in TIME_WAIT is
  // usable, a port some process listens on is not.
  int fd = bind_socket(INADDR_ANY, port, true);
  if (fd >= 0) {
    close(fd);
    return "";
  }
  if (errno == EADDRINUSE || errno == EACCES) return "busy";
  return std::string("cannot be used: ") + strerror(errno);
}

int listen_on_free_port(Reach reach, int& port) {
  int fd = bind_socket(reach == Reach::kEveryInterface ? INADDR_ANY : INADDR_LOOPBACK, 0, false);
  if (fd < 0 || listen(fd, 128) != 0) throw Error(std::string("cannot listen for rank shims: ") + strerror(errno));
  port = bound_port(fd);
  return fd;
}

void admit_only_guarded(int fd, const ListenGuard& guard) {
  if (guard.library.empty()) return;
  uint32_t sources[NANO_MAX_SOURCES];
  const int count = nano_parse_sources(listen_guard_value(guard).c_str(), sources, NANO_MAX_SOURCES);
  const int err = count < 0 ? EINVAL : nano_admit_only(fd, sources, count);
  if (err != 0) throw Error("cannot close nano-run's listener to strangers: " + std::string(std::strerror(err)));
}

int connect_to(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(found);
  return fd;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

}  // namespace nano
