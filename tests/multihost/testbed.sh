#!/bin/bash
# Several "hosts" on this one machine, for multi-host tests: one network namespace per host
# joined by a bridge (in a namespace of its own, so nothing touches this machine's network),
# a UTS namespace per host for its own hostname (Open MPI tells nodes apart by name), a mount
# namespace with the host's own /etc/hosts (Debian's usual "127.0.1.1 <hostname>" line
# included), a private /dev/shm, and an Open MPI launch agent (agent.sh) that runs a
# command "on" a host by entering its namespaces, with a fresh environment as ssh would give.
#
#   testbed.sh up STATE N      make hosts hostA, hostB, ... (N of them) on 10.251.<r>.0/24
#   testbed.sh run STATE HOST CMD...   run CMD on HOST with this environment (a logged-in user)
#   testbed.sh pids STATE HOST print the pids of every process on HOST
#   testbed.sh link STATE HOST up|down   set HOST's link to the bridge up or down (the launch
#                              agent then cannot reach it either, as ssh could not)
#   testbed.sh kill STATE HOST kill every process on HOST, its namespaces' holder too: a dead
#                              host (its /dev/shm gone with its memory; the agent cannot enter it)
#   testbed.sh revive STATE HOST  a killed HOST boots again: fresh namespaces' holder, same address
#   testbed.sh down STATE      kill every process on every host, remove everything made
#
# STATE is a folder every host sees (the hosts share the file system but /dev/shm). Needs root (CAP_SYS_ADMIN and
# CAP_NET_ADMIN), ip, unshare and nsenter; exits 77 (ctest's skip code) with a line otherwise.
set -u
cmd=${1:-}
state=${2:-}
[ -n "$cmd" ] && [ -n "$state" ] || { echo "usage: testbed.sh up|run|pids|link|down STATE ..." >&2; exit 2; }

names=(hostA hostB hostC hostD)

host_pid() { cat "$state/$1.pid" 2>/dev/null; }

# The processes whose network namespace is HOST's: one `ip netns pids` (a scan of /proc in
# bash forks a readlink per process, seconds per call on a busy machine; teardown and every
# case's leftover checks call this many times).
pids_of() {
  ip netns pids "nano-$(cat "$state/tag" 2>/dev/null)-$1" 2>/dev/null
}

# boot HOST: the holder of HOST's UTS and mount namespaces (its name, /etc/hosts, a private
# /dev/shm), inside its network namespace.
boot() {
  ip netns exec "nano-$(cat "$state/tag")-$1" unshare --uts --mount --propagation private -- sh -c "
    hostname $1 &&
    mount -t tmpfs -o size=256m nano-shm /dev/shm &&
    mount --bind '$state/$1.hosts' /etc/hosts &&
    exec sleep infinity" &
  echo $! > "$state/$1.pid"
}

# Ready when HOST answers under its own name.
wait_booted() {
  for _ in $(seq 1 100); do
    [ "$(nsenter -t "$(host_pid "$1")" --uts hostname 2>/dev/null)" = "$1" ] &&
      nsenter -t "$(host_pid "$1")" --mount --root cat /etc/hosts 2>/dev/null | grep -q "$1" && break
    sleep 0.02
  done
}

case "$cmd" in
up)
  n=${3:-2}
  if [ "$(id -u)" != 0 ] || ! command -v ip > /dev/null || ! command -v nsenter > /dev/null; then
    echo "SKIP: the multi-host test bed needs root, ip and nsenter" >&2
    exit 77
  fi
  mkdir -p "$state" || exit 1
  tag=$(printf '%04x' $((RANDOM % 65536)))
  subnet="10.251.$((RANDOM % 250 + 1))"
  echo "$tag" > "$state/tag"
  echo "$subnet" > "$state/subnet"
  sw="nano-$tag-sw"
  ip netns add "$sw" || { echo "SKIP: cannot make network namespaces here" >&2; exit 77; }
  ip -n "$sw" link add br0 type bridge && ip -n "$sw" link set br0 up || exit 1
  : > "$state/hosts"
  {
    echo "127.0.0.1 localhost"
    for i in $(seq 1 "$n"); do echo "$subnet.$i ${names[$((i - 1))]}"; done
  } > "$state/hosts.common"
  for i in $(seq 1 "$n"); do
    h=${names[$((i - 1))]}
    ns="nano-$tag-$h"
    ip netns add "$ns" || exit 1
    ip link add "v$tag$i" type veth peer name eth0 netns "$ns" || exit 1
    ip link set "v$tag$i" netns "$sw" || exit 1
    ip -n "$sw" link set "v$tag$i" master br0 up || exit 1
    ip -n "$ns" addr add "$subnet.$i/24" dev eth0 || exit 1
    ip -n "$ns" link set eth0 up && ip -n "$ns" link set lo up || exit 1
    # Debian's installer writes "127.0.1.1 <hostname>": the layout that misleads Gloo.
    { echo "127.0.1.1 $h"; cat "$state/hosts.common"; } > "$state/$h.hosts"
    boot "$h"
    echo "$h" >> "$state/hosts"
  done
  for h in $(cat "$state/hosts"); do wait_booted "$h"; done
  ;;
run)
  h=$3
  shift 3
  pid=$(host_pid "$h")
  [ -n "$pid" ] || { echo "testbed: no host $h in $state" >&2; exit 2; }
  # --root: entering a mount namespace resets the root, which inside a chroot (the Debian 13
  # root) would be the machine's; take the host's own, and stay in this folder.
  exec nsenter -t "$pid" --net --uts --mount --root --wd="$PWD" -- "$@"
  ;;
pids)
  pids_of "$3"
  ;;
link)
  tag=$(cat "$state/tag")
  i=0
  for h in $(cat "$state/hosts"); do
    i=$((i + 1))
    [ "$h" = "$3" ] && ip -n "nano-$tag-sw" link set "v$tag$i" "$4" && echo "$4" > "$state/$h.link"
  done
  ;;
kill)
  for _ in 1 2; do
    for p in $(pids_of "$3"); do kill -KILL "$p" 2> /dev/null; done
    sleep 0.1
  done
  rm -f "$state/$3.pid"
  ;;
revive)
  boot "$3"
  wait_booted "$3"
  ;;
down)
  [ -d "$state" ] || exit 0
  tag=$(cat "$state/tag" 2>/dev/null)
  # Every process of every host (the holders last), twice: a dying orted may still fork.
  for _ in 1 2; do
    for h in $(cat "$state/hosts" 2>/dev/null); do
      for p in $(pids_of "$h"); do kill -KILL "$p" 2> /dev/null; done
    done
    sleep 0.1
  done
  if [ -n "$tag" ]; then
    for h in $(cat "$state/hosts" 2>/dev/null); do ip netns del "nano-$tag-$h" 2> /dev/null; done
    ip netns del "nano-$tag-sw" 2> /dev/null
  fi
  rm -rf "$state"
  ;;
*)
  echo "testbed.sh: unknown command '$cmd'" >&2
  exit 2
  ;;
esac
