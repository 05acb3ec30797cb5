#!/usr/bin/env bash
# What an elastic run (nano-run --min-hosts, docs/multihost.md) costs when a host is lost for good
# and when it comes back, on the namespace test bed (tests/multihost/testbed.sh): 3 hosts x 1 rank
# of fault_rank (a small DDP training, ~60 ms a step here), checkpoints every 10 steps,
# --heartbeat-timeout 5, --restart-delay 1 (the default).
#  1. shrink: at a random step past 20, hostC dies (every process killed, its link down). From the
#     loss to the smaller world's rank 0 resuming (its checkpoint loaded), and to its first step;
#     the steps lost (those since the last checkpoint).
#  2. rejoin (--host-lost-after 1 --rejoin): hostC boots again while the 2 hosts train; nano-run,
#     asking the hosts that left every 5 s, finds it answers and asks the ranks to stop at their next
#     checkpoint, where the world grows back. From hostC's return to the grown world's resume and
#     first step (the wait for the next ask included); the steps lost (those since the checkpoint
#     the smaller world stopped at: none).
# Each run is one elastic job (both events); RUNS of them (default 3), then the ranges.
# Needs root.
# Usage: scripts/bench.sh elastic [BUILD_DIR] [RUNS]
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start elastic "$@"
build=$(cd "$(bench_build_dir "${1:-}")" && pwd)
runs=${2:-3}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "bench elastic: RUNS must be a whole number >= 1, got '$runs'" >&2; exit 2; }
here=$PWD
tb=$here/tests/multihost/testbed.sh
state=$(mktemp -d /run/nano-bench-elastic-XXXXXX)
dir=$(mktemp -d /tmp/nano-bench-elastic-XXXXXX)
trap 'bash "$tb" down "$state"; rm -rf "$dir"' EXIT
export NANO_TESTBED=$state OMPI_MCA_plm_rsh_agent=$here/tests/multihost/agent.sh OMPI_MCA_plm_rsh_no_tree_spawn=1
export PRTE_MCA_plm_ssh_agent=$here/tests/multihost/agent.sh PRTE_MCA_plm_ssh_no_tree_spawn=1

now() { date +%s.%N; }
# until COMMAND succeeds (bounded at 120 s), then the time.
until_true() {
  local i
  for i in $(seq 1 6000); do
    if eval "$1"; then now; return 0; fi
    sleep 0.02
  done
  echo "bench elastic: timed out waiting for: $1" >&2
  exit 1
}
progress() { cut -d' ' -f1 "$dir/progress" 2>/dev/null || echo 0; }
attempt() { cut -d' ' -f2 "$dir/progress" 2>/dev/null || echo 0; }
resumed() { grep -ao '^\[rank 0\] fault_rank: rank 0 resumed at step [0-9]*' "$dir/out" | sed -n "${1}p" | grep -o '[0-9]*$'; }

printf '%-4s %-16s %10s %10s %10s %16s %16s\n' run event "at step" resumed "steps lost" "to resumed s" "to 1st step s"
rows=()
for run in $(seq 1 "$runs"); do
  bash "$tb" up "$state" 3
  rm -rf "$dir/ckpt" "$dir/progress"
  bash "$tb" run "$state" hostA "$build/bin/nano-run" --hosts hostA:1,hostB:1,hostC:1 --min-hosts 2 --max-restarts 3 \
    --host-lost-after 1 --rejoin --heartbeat-timeout 5 --grace-period 1 \
    "$build/tests/faults/fault_rank" --steps 300 --checkpoint-dir "$dir/ckpt" --checkpoint-every 10 \
    --progress "$dir/progress" > "$dir/out" 2>&1 &
  job=$!
  # 1. shrink
  kill_at=$((21 + RANDOM % 9))
  until_true "[ \$(progress) -ge $kill_at ]" > /dev/null
  at=$(progress)
  t0=$(now)
  bash "$tb" kill "$state" hostC
  bash "$tb" link "$state" hostC down
  t1=$(until_true "[ -n \"\$(resumed 1)\" ]")
  c1=$(resumed 1)
  t2=$(until_true "[ \$(attempt) = 1 ]")  # rank 0's first step in the 2-host world
  row=$(printf '%-4s %-16s %10s %10s %10s %16.2f %16.2f' "$run" "shrink 3->2" "$at" "$c1" $((at - c1)) \
    "$(bc -l <<<"$t1 - $t0")" "$(bc -l <<<"$t2 - $t0")")
  echo "$row"
  rows+=("$row")
  # 2. rejoin: hostC back; the 2-host world stops at its next checkpoint once nano-run hears it
  bash "$tb" revive "$state" hostC
  bash "$tb" link "$state" hostC up
  t0=$(now)
  t1=$(until_true "[ -n \"\$(resumed 2)\" ]")
  c2=$(resumed 2)
  stopped=$(grep -ao '^\[rank 0\] nano: stopping at the checkpoint of step [0-9]*' "$dir/out" | grep -o '[0-9]*$')
  t2=$(until_true "[ \$(attempt) = 2 ]")  # rank 0's first step in the 3-host world
  row=$(printf '%-4s %-16s %10s %10s %10s %16.2f %16.2f' "$run" "rejoin 2->3" "$stopped" "$c2" $((stopped - c2)) \
    "$(bc -l <<<"$t1 - $t0")" "$(bc -l <<<"$t2 - $t0")")
  echo "$row"
  rows+=("$row")
  wait "$job" || { echo "bench elastic: run $run: nano-run exited $?" >&2; tail -5 "$dir/out" >&2; exit 1; }
  grep -q "^nano-run: worlds: .*attempt 3: hostA,hostB,hostC (3 ranks) after hostC answers again" "$dir/out" ||
    { echo "bench elastic: run $run: the world did not grow back" >&2; grep '^nano-run' "$dir/out" >&2; exit 1; }
  bash "$tb" down "$state"
done
echo
echo "ranges over $runs runs (seconds from the loss, or from the host's return):"
for event in "shrink 3->2" "rejoin 2->3"; do
  printf '%s\n' "${rows[@]}" | awk -v e="$event" '
    substr($0, 6, 16) ~ e { n++; r = $(NF-1); f = $NF; l = $(NF-2);
      if (n == 1 || r < rmin) rmin = r; if (r > rmax) rmax = r;
      if (n == 1 || f < fmin) fmin = f; if (f > fmax) fmax = f;
      if (n == 1 || l < lmin) lmin = l; if (l > lmax) lmax = l }
    END { printf "  %-12s to resumed %.2f-%.2f s, to the first step %.2f-%.2f s, steps lost %d-%d\n", e, rmin, rmax, fmin, fmax, lmin, lmax }'
done
