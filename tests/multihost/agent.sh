#!/bin/bash
# Open MPI's launch agent for the multi-host test bed (OMPI_MCA_plm_rsh_agent): called as ssh
# would be, `agent.sh [ssh options] HOST COMMAND...`, it runs COMMAND on HOST by entering that
# host's namespaces (testbed.sh), with the fresh environment of an ssh login instead of the
# caller's. NANO_TESTBED names the test bed's STATE folder. Open MPI 4 takes it as
# OMPI_MCA_plm_rsh_agent, Open MPI 5 (PRRTE) as PRTE_MCA_plm_ssh_agent.
set -u
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done  # ssh-style options: none apply
host=$1
shift
# Open MPI 5 (PRRTE) asks for hosts by their lower-cased names.
pid=$(cat "$(find "$NANO_TESTBED" -maxdepth 1 -iname "$host.pid" | head -1)" 2>/dev/null)
[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || { echo "agent.sh: connect to host $host: No route to host" >&2; exit 255; }
# A host whose link is down cannot be reached, as ssh could not reach it.
[ "$(cat "$(find "$NANO_TESTBED" -maxdepth 1 -iname "$host.link" | head -1)" 2>/dev/null)" != down ] ||
  { echo "agent.sh: connect to host $host: Connection timed out" >&2; exit 255; }
exec nsenter -t "$pid" --net --uts --mount --root --wd=/ -- env -i HOME="${HOME:-/root}" USER="$(id -un)" LOGNAME="$(id -un)" \
  SHELL=/bin/sh PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 /bin/sh -c "$*"
