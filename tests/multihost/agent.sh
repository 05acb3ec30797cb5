#!/bin/bash
# Open MPI's launch agent for the multi-host test bed (OMPI_MCA_plm_rsh_agent): called as ssh
# would be, `agent.sh [ssh options] HOST COMMAND...`, it runs COMMAND on HOST by entering that
# host's namespaces (testbed.sh), with the fresh environment of an ssh login instead of the
# caller's. NANO_TESTBED names the test bed's STATE folder.
set -u
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done  # ssh-style options: none apply
host=$1
shift
pid=$(cat "$NANO_TESTBED/$host.pid" 2>/dev/null)
[ -n "$pid" ] || { echo "agent.sh: no host '$host' in the test bed $NANO_TESTBED" >&2; exit 255; }
exec nsenter -t "$pid" --net --uts --mount -- env -i HOME="${HOME:-/root}" USER="$(id -un)" LOGNAME="$(id -un)" \
  SHELL=/bin/sh PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 /bin/sh -c "$*"
