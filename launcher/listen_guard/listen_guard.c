// The listen guard: a library nano-run preloads (LD_PRELOAD) into the processes of a job over
// several hosts: mpirun, Open MPI's daemons on the other hosts, and the ranks. Every TCP socket
// such a process makes listen where other hosts could reach it gets, before it listens, the
// filter of launcher/source_filter/source_filter.h for the job's hosts (NANO_LISTEN_GUARD): a stranger on the
// network never gets a connection to Open MPI's daemons and transports, Gloo's pairs, or
// torch's store, whose protocols admit whoever connects first and wait for the bytes of whoever
// connected. (nano's own listeners, the job store and nano-run's link to the shims, also ask for
// the job's secret.) Without NANO_LISTEN_GUARD, or with "off", it changes nothing; with a value
// it cannot read it fails closed: every such listen() fails with EACCES, after one line naming
// the value (nano-run and its shims check the value they pass before anything starts).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher/source_filter/source_filter.h"

static uint32_t sources[NANO_MAX_SOURCES];
static int guard = NANO_GUARD_OFF;  // how many sources are admitted, NANO_GUARD_OFF or NANO_GUARD_MALFORMED
static char guard_text[256];        // the value as read (cut short), for the line that names it
static int told = 0;                // that line was printed

__attribute__((constructor)) static void read_guard(void) {
  const char* text = getenv(NANO_LISTEN_GUARD_VARIABLE);
  guard = nano_read_guard(text, sources, NANO_MAX_SOURCES);
  // A copy: the program may change its environment before it listens.
  if (text) snprintf(guard_text, sizeof guard_text, "%s", text);
}

int listen(int fd, int backlog) {
  static int (*real_listen)(int, int) = NULL;
  if (!real_listen) real_listen = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
  if (!real_listen) {
    errno = ENOSYS;
    return -1;
  }
  // Before listening: no packet of a stranger arrives in between.
  if (guard != NANO_GUARD_OFF && nano_reachable_tcp_socket(fd)) {
    if (guard == NANO_GUARD_MALFORMED) {
      if (!__atomic_exchange_n(&told, 1, __ATOMIC_RELAXED))
        fprintf(stderr,
                "nano: bad %s='%s': every listener other hosts could reach is refused (expected IPv4 addresses "
                "separated by commas, or off)\n",
                NANO_LISTEN_GUARD_VARIABLE, guard_text);
      errno = EACCES;
      return -1;
    }
    const int err = nano_admit_only(fd, sources, guard);
    if (err != 0) {
      // Better a job that cannot listen than one a stranger can stall: the caller sees why.
      errno = err;
      return -1;
    }
  }
  return real_listen(fd, backlog);
}
