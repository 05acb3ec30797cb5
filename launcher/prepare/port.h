#pragma once
// TCP ports: the rendezvous port handed to ranks as MASTER_PORT, and the launcher's own
// listening socket for mpi-backend rank shims.
#include <string>

#include "launcher/prepare/rank_env.h"

namespace nano {

/// A port that is free right now on this machine, picked at random below the kernel's ephemeral
/// range so that nothing takes it before rank 0 binds it (the OS's bind(0) pick as a fallback).
int pick_free_port();

/// "" when `port` can be bound here now (as the rendezvous server binds it); "busy" when some
/// process listens on it; else "cannot be used: <why>". The caller names the setting.
std::string port_unusable_reason(int port);

/// Where a listener takes connections from: this host only (127.0.0.1), or every interface
/// (0.0.0.0, for rank shims on other hosts).
enum class Reach { kThisHost, kEveryInterface };

/// Opens a listening TCP socket (CLOEXEC) reachable as `reach` says, port chosen by the OS.
/// Returns the fd and sets `port`. Throws Error on failure.
int listen_on_free_port(Reach reach, int& port);

/// Closes listener `fd` (nano-run's own) to every source but `guard`'s, as the preloaded guard
/// closes the job's other listeners (launcher/listen_guard/listen_guard.c); nothing when `guard` has no library.
/// Throws Error naming why the filter cannot be attached.
void admit_only_guarded(int fd, const ListenGuard& guard);

/// Connects to host:port (TCP). Returns the fd (CLOEXEC) or -1.
int connect_to(const std::string& host, int port);

/// This machine's host name.
std::string host_name();

}  // namespace nano
