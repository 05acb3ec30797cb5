// The listen guard: a library nano-run preloads (LD_PRELOAD) into the processes of a job over
// several hosts: mpirun, Open MPI's daemons on the other hosts, and the ranks. Every TCP socket
// such a process makes listen where other hosts could reach it gets, before it listens, the
// filter of launcher/source_filter.h for the job's hosts (NANO_LISTEN_GUARD): a stranger on the
// network never gets a connection to Open MPI's daemons and transports, Gloo's pairs, or
// torch's store, whose protocols admit whoever connects first and wait for the bytes of whoever
// connected. (nano's own listeners, the job store and nano-run's link to the shims, also ask for
// the job's secret.) Without NANO_LISTEN_GUARD it changes nothing.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "launcher/source_filter.h"

static uint32_t sources[NANO_MAX_SOURCES];
static int source_count = -1;  // -1: no guard (NANO_LISTEN_GUARD unset or unusable)

__attribute__((constructor)) static void read_guard(void) {
  const char* text = getenv(NANO_LISTEN_GUARD_VARIABLE);
  if (!text || !*text) return;
  source_count = nano_parse_sources(text, sources, NANO_MAX_SOURCES);
  if (source_count < 0) fprintf(stderr, "nano: bad %s='%s': listeners stay open\n", NANO_LISTEN_GUARD_VARIABLE, text);
}

int listen(int fd, int backlog) {
  static int (*real_listen)(int, int) = NULL;
  if (!real_listen) real_listen = (int (*)(int, int))dlsym(RTLD_NEXT, "listen");
  if (!real_listen) {
    errno = ENOSYS;
    return -1;
  }
  // Before listening: no packet of a stranger arrives in between.
  if (source_count >= 0 && nano_reachable_tcp_socket(fd)) {
    const int err = nano_admit_only(fd, sources, source_count);
    if (err != 0) {
      // Better a job that cannot listen than one a stranger can stall: the caller sees why.
      errno = err;
      return -1;
    }
  }
  return real_listen(fd, backlog);
}
