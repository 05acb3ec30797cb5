#pragma once
// Which of this host's addresses the other hosts of a job can reach: Gloo must advertise one
// (its default, the address the hostname resolves to, is 127.0.1.1 on a typical Debian host,
// which no other host can connect to).
#include <string>

namespace nano {

/// The local IPv4 address this host's routing table uses to reach `host` (a name or address),
/// found without sending anything (a UDP socket's connect()); "" when it does not resolve or
/// there is no route.
std::string local_address_towards(const std::string& host);

/// The name of the interface holding local IPv4 address `address` ("eth0"); "" when none does.
std::string interface_of(const std::string& address);

/// The first up, non-loopback IPv4 address of this host (interface order); "" when none.
std::string first_non_loopback_address();

/// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_address(const std::string& address);

/// The address this rank's Gloo device binds and advertises in a job that spans hosts: the one
/// routing to `master_addr` unless that is a loopback one (this rank shares the master's host,
/// whose name may resolve to 127.0.1.1), then `host_addr` (the launcher's NANO_HOST_ADDR) when
/// given, else the first non-loopback address; "" when there is none.
std::string multi_host_address(const std::string& master_addr, const std::string& host_addr);

}  // namespace nano
