#pragma once
// Where a Gloo group listens: the one choice that the Gloo communicator and the torch backend
// share, so that both listen on loopback on one host and on the address that reaches the master
// across hosts. Only the choice: making the Gloo device from it needs Gloo's headers
// (runtime/collectives/gloo_device.h), which the torch backend does without (it makes its Gloo group through
// torch's Python binding, python/module.cc), so that it builds against a pip wheel of
// torch too.
#include <string>

namespace nano {

/// An interface to bind by name, or else an address to bind and advertise.
struct GlooBinding {
  std::string interface;    ///< non-empty: this interface (GLOO_SOCKET_IFNAME)
  std::string hostname;     ///< otherwise: this address
  std::string description;  ///< e.g. "10.0.0.2 (eth0)" or "interface eth1 (GLOO_SOCKET_IFNAME)"; "" on one host
};

/// In order: GLOO_SOCKET_IFNAME when set; across hosts (`multi_host`), the address that
/// routes to `master_addr` (or NANO_HOST_ADDR, or the first non-loopback address: Gloo's own
/// default would advertise what the hostname resolves to, 127.0.1.1 on a typical Debian host,
/// which other hosts cannot reach); on one host, loopback (127.0.0.1), so that nothing of a
/// one-host job listens where another machine can reach it. Throws nano::Error naming `rank` and
/// `master_addr` when a multi-host rank has no address that reaches the master.
GlooBinding choose_gloo_binding(const std::string& master_addr, bool multi_host, int rank);

}  // namespace nano
