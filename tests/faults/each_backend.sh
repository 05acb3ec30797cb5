#!/bin/sh
# each_backend.sh SUITE: the fault suite once per backend, both at once, each in a mount
# namespace of its own with a private /dev/shm and /tmp (so each run's "nothing left" check sees
# only its own jobs). The suite waits on timeouts more than it computes (alone it keeps about
# 0.6 of a core busy), so the two halves together take about half the time on the same cores.
# Both halves' output is printed whole; the exit code is the first failing half's.
suite=$1
# In the test's own folder, not /tmp: when ctest's timeout kills this script before it prints
# them, the halves' outputs stay there, named on the first line, to say where the suite stalled.
logs=$PWD/fault-suite-output
rm -rf "$logs" && mkdir "$logs" || exit 1
echo "each_backend.sh: the halves' output is in $logs until both end"
# half BACKEND (run with &): the suite for one backend, its output in $logs/BACKEND. The
# background shell becomes the suite, which is killed if this script is (ctest's timeout), as it
# would be had ctest started it itself.
half() {
  export NANO_FAULT_BACKEND=$1
  exec setpriv --pdeathsig KILL unshare --mount --propagation private -- \
    sh -c 'mount -t tmpfs -o mode=1777 nano-faults /dev/shm && mount -t tmpfs -o mode=1777 nano-faults /tmp && exec env -u TMPDIR "$0"' \
    "$suite" > "$logs/$1" 2>&1
}
half subprocess &
subprocess=$!
half mpi &
mpi=$!
wait "$subprocess"
rc_subprocess=$?
wait "$mpi"
rc_mpi=$?
for backend in subprocess mpi; do
  echo "=== the fault suite on the $backend backend ==="
  cat "$logs/$backend"
done
rm -rf "$logs"
[ "$rc_subprocess" -ne 0 ] && exit "$rc_subprocess"
exit "$rc_mpi"
