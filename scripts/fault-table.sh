#!/usr/bin/env bash
# Prints the fault table of the supervision design: each way a rank can stop x each backend ->
# time to end, nano-run's exit code, the root cause it names, and what was left (processes of
# the job, files in /dev/shm, Open MPI session folders in /tmp). Needs a build (scripts/test.sh).
# Usage: scripts/fault-table.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-${NANO_BUILD_DIR:-build}}
nano_run=$build/bin/nano-run
fault_rank=$build/tests/faults/fault_rank
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NANO_COLLECTIVE_TIMEOUT=${NANO_COLLECTIVE_TIMEOUT:-10} NANO_RENDEZVOUS_TIMEOUT=${NANO_RENDEZVOUS_TIMEOUT:-10}
faults=(throw@step:3@1 return@step:3@1 exit@step:3@1 segv@step:3@1 kill@step:3@1 zero@step:3@1
        hang@step:3@1 stop@step:3@1 zero@init@1 hang@init@1 return@teardown@1 exit@exit@1)
echo "NANO_COLLECTIVE_TIMEOUT=$NANO_COLLECTIVE_TIMEOUT s, NANO_RENDEZVOUS_TIMEOUT=$NANO_RENDEZVOUS_TIMEOUT s, --grace-period 2"
printf '| %-18s | %-10s | %6s | %4s | %-44s | %s |\n' fault backend "end s" exit "root cause" "left"
printf '|%s|%s|%s|%s|%s|%s|\n' ------------------- ------------ -------- ------ ---------------------------------------------- ------
for f in "${faults[@]}"; do
  for backend in subprocess mpi; do
    pids=$(mktemp -d) out=$(mktemp)
    shm_before=$(ls /dev/shm | sort) tmp_before=$(ls /tmp | grep '^ompi\.' | sort)
    start=$(date +%s.%N)
    timeout 120 "$nano_run" -n 2 --backend "$backend" --grace-period 2 "$fault_rank" --steps 8 \
      --fault "$f" --pid-dir "$pids" --grandchild > "$out" 2>&1
    rc=$?
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    sleep 0.5
    left=""
    for p in $(cat "$pids"/*.pid 2>/dev/null); do
      [ -e /proc/$p ] && [ "$(awk '{print $3}' /proc/$p/stat 2>/dev/null)" != Z ] && left+="pid $p "
    done
    new_shm=$(comm -13 <(echo "$shm_before") <(ls /dev/shm | sort) | tr '\n' ' ')
    new_tmp=$(comm -13 <(echo "$tmp_before") <(ls /tmp | grep '^ompi\.' | sort) | tr '\n' ' ')
    left+="$new_shm$new_tmp"
    cause=$(grep -o 'root cause: [^;]*' "$out" | head -1 | sed 's/root cause: //; s/ on [^ ]* / /')
    printf '| %-18s | %-10s | %6.1f | %4s | %-44s | %s |\n' "$f" "$backend" "$secs" "$rc" "${cause:-none}" "${left:-nothing}"
    for p in $(cat "$pids"/*.pid 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
    rm -rf "$pids" "$out"
  done
done
