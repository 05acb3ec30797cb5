#include "runtime/collectives/gloo_binding.h"

#include <cstdlib>

#include <nano/error.h>
#include "core/rank_contract.h"
#include "runtime/rendezvous/net_address.h"

namespace nano {

GlooBinding choose_gloo_binding(const std::string& master_addr, bool multi_host, int rank) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    return {ifname, "", std::string("interface ") + ifname + " (GLOO_SOCKET_IFNAME)"};
  }
  if (multi_host) {
    const char* host_addr = std::getenv(contract::kHostAddr);
    const std::string address = multi_host_address(master_addr, host_addr ? host_addr : "");
    if (address.empty()) {
      throw Error("nano: rank " + std::to_string(rank) + " has no address that reaches " + master_addr +
                  " (set GLOO_SOCKET_IFNAME to the interface other hosts reach this one through)");
    }
    const std::string name = interface_of(address);
    return {"", address, address + (name.empty() ? "" : " (" + name + ")")};
  }
  // One host: nothing needs to be reachable from outside it, whatever MASTER_ADDR names, so
  // Gloo's pairs listen on loopback only.
  return {"", "127.0.0.1", ""};
}

}  // namespace nano
