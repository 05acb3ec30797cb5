#include "runtime/rendezvous/net_address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace nano {

bool is_loopback_address(const std::string& address) {
  return address == "localhost" || address.rfind("127.", 0) == 0 || address == "::1";
}

std::string local_address_towards(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || !found) return "";
  std::string out;
  const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    sockaddr_in local{};
    socklen_t len = sizeof local;
    // A datagram socket's connect() only picks the route and the source address.
    if (connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0) {
      char text[INET_ADDRSTRLEN];
      if (inet_ntop(AF_INET, &local.sin_addr, text, sizeof text)) out = text;
    }
    close(fd);
  }
  freeaddrinfo(found);
  return out;
}

namespace {

// Calls `visit(name, address)` for every up IPv4 address; stops when it returns true.
template <class Visit>
void each_ipv4(Visit visit) {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return;
  for (ifaddrs* a = all; a; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP)) continue;
    char text[INET_ADDRSTRLEN];
    if (!inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof text)) continue;
    if (visit(std::string(a->ifa_name), std::string(text))) break;
  }
  freeifaddrs(all);
}

}  // namespace

std::string interface_of(const std::string& address) {
  std::string out;
  each_ipv4([&](const std::string& name, const std::string& a) {
    if (a != address) return false;
    out = name;
    return true;
  });
  return out;
}

std::string first_non_loopback_address() {
  std::string out;
  each_ipv4([&](const std::string&, const std::string& a) {
    if (is_loopback_address(a)) return false;
    out = a;
    return true;
  });
  return out;
}

std::string multi_host_address(const std::string& master_addr, const std::string& host_addr) {
  const std::string routed = local_address_towards(master_addr);
  if (!routed.empty() && !is_loopback_address(routed)) return routed;
  if (!host_addr.empty()) return host_addr;
  return first_non_loopback_address();
}

}  // namespace nano
