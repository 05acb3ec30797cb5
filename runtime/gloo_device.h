#pragma once
// Which network device a Gloo group binds: the one choice the Gloo communicator and the torch
// backend share, so both listen on loopback on one host and on the address that reaches the
// master across hosts.
#include <memory>
#include <string>

namespace gloo {
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace nano {

/// A Gloo TCP device and the words that say what it uses ("" on one host).
struct GlooDevice {
  std::shared_ptr<::gloo::transport::Device> device;
  std::string description;  ///< e.g. "10.0.0.2 (eth0)" or "interface eth1 (GLOO_SOCKET_IFNAME)"
};

/// In order: GLOO_SOCKET_IFNAME when set; across hosts (`multi_host`), the address that
/// routes to `master_addr` (or NANO_HOST_ADDR, or the first non-loopback address: Gloo's own
/// default would advertise what the hostname resolves to, 127.0.1.1 on a typical Debian host,
/// which other hosts cannot reach); on one host, loopback (127.0.0.1), so that nothing of a
/// one-host job listens where another machine can reach it. Throws nano::Error naming `rank` and
/// `master_addr` when a multi-host rank has no address that reaches the master.
GlooDevice make_gloo_device(const std::string& master_addr, bool multi_host, int rank);

}  // namespace nano
