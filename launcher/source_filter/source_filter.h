#pragma once
// Listeners closed to every host but a job's, in the kernel: a classic BPF socket filter that
// passes only packets from a list of IPv4 sources (and IPv6's ::1), attached to a socket before
// it listens. The packets of any other source are dropped before a connection is made, so a
// stranger's attempt, or a flood of them, never becomes a connection, a descriptor or a
// wake-up of the program; connections accepted from the listener keep the filter.
//
// Plain C: the listen guard (launcher/listen_guard/listen_guard.c), which nano-run preloads into the processes
// of a job over several hosts (mpirun, Open MPI's daemons, the ranks), is a C library that
// must not bring a C++ runtime into the programs it is preloaded into.
#include <linux/filter.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// The variable naming the sources a guarded listener admits: IPv4 addresses, comma-separated.
#define NANO_LISTEN_GUARD_VARIABLE "NANO_LISTEN_GUARD"

/// The most sources one filter holds (its jumps reach 255 instructions at most).
#define NANO_MAX_SOURCES 240
/// A filter's instructions besides one per source.
#define NANO_FILTER_OVERHEAD 15

/// Pure: writes to `program` (room for `room` instructions: count + NANO_FILTER_OVERHEAD) the filter
/// passing the `count` IPv4 `sources` (network order) and IPv6's ::1, dropping everything
/// else. Returns the number of instructions, or -1 when `room` or NANO_MAX_SOURCES is short.
int nano_source_filter(const uint32_t* sources, int count, struct sock_filter* program, int room);

/// Pure: the IPv4 addresses of `text` ("10.0.0.1,10.0.0.2": one or more dotted quads separated
/// by single commas, nothing else) into `sources`. Returns their number, or -1 when `text` is not
/// such a list (empty, an empty item or a trailing comma, spaces, a name, "1.2.3", an IPv6
/// address) or holds more than `room` addresses.
int nano_parse_sources(const char* text, uint32_t* sources, int room);

/// What the listen guard does for a value of NANO_LISTEN_GUARD, besides a number of sources.
#define NANO_GUARD_OFF (-1)       /* unset, or "off": no guard, listeners are left as they are */
#define NANO_GUARD_MALFORMED (-2) /* anything else that is no list of sources: every guarded listen() fails */

/// Pure: what the listen guard does for NANO_LISTEN_GUARD's `value` (NULL: unset): admits the
/// sources it names (their number, filled into `sources`), NANO_GUARD_OFF or NANO_GUARD_MALFORMED.
/// A value that cannot be read fails closed: better a job that cannot listen than an open one.
int nano_read_guard(const char* value, uint32_t* sources, int room);

/// Attaches the filter for `sources` to socket `fd`. Returns 0, or an errno value.
int nano_admit_only(int fd, const uint32_t* sources, int count);

/// Whether socket `fd` is a TCP socket that other hosts could reach once it listens: IPv4 not
/// bound to 127.0.0.0/8, or IPv6 not bound to ::1 (nor to a v4-mapped loopback address).
int nano_reachable_tcp_socket(int fd);

#ifdef __cplusplus
}
#endif
