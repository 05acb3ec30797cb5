#!/usr/bin/env bash
# Batch balancing: LeNet on Fashion-MNIST under `nano-run -n N --backend mpi` (N = physical
# cores, one rank per core), nano's default (each step's N x 64 samples split by the ranks'
# measured speed) against --equal-batches (64 each), interleaved, median of REPEATS runs:
#   quiet cores          nothing else running;
#   noisy neighbour      a process pinned to the last rank's CPU keeps it busy DUTY% of the
#                        time (a cloud neighbour, a daemon, a slower core), so that rank is
#                        slower and, with equal batches, every rank waits for it.
# Usage: scripts/bench.sh balance [BUILD_DIR] [STEPS] [REPEATS] [DUTY]
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start balance "$@"
build=$(bench_build_dir "${1:-}")
steps=${2:-300}
repeats=${3:-3}
duty=${4:-30}
for f in "$build/bin/nano-run" "$build/bin/nano-init" "$build/bin/fashion_mnist_nano"; do
  [[ -x $f ]] || { echo "bench balance: $f not built" >&2; exit 2; }
done
[[ $duty =~ ^[0-9]+$ && $duty -ge 1 && $duty -le 90 ]] || { echo "bench balance: bad DUTY '$duty': expected 1..90" >&2; exit 2; }

cores=$(bench_cores "$build")
plan=$("$build/bin/nano-run" -n "$cores" --backend mpi --dry-run --json /bin/true)
ranks=$("$python" -c 'import json,sys; print(len(json.load(sys.stdin)["ranks"]))' <<<"$plan")
cpu=$("$python" -c 'import json,sys; print(json.load(sys.stdin)["ranks"][-1]["cpus"][0])' <<<"$plan")
(( ranks >= 2 )) || { echo "bench balance: needs at least 2 ranks (this machine plans $ranks)"; exit 0; }

hog_pid=
stop_hog() {
  if [[ -n $hog_pid ]]; then
    kill "$hog_pid" 2>/dev/null || true
    wait "$hog_pid" 2>/dev/null || true
  fi
  hog_pid=
}
trap stop_hog EXIT
# Busy DUTY% of every 10 ms on one CPU.
start_hog() {
  taskset -c "$cpu" "$python" -c '
import sys, time
busy = int(sys.argv[1]) / 10000.0  # DUTY% of 10 ms
while True:
    end = time.perf_counter() + busy
    while time.perf_counter() < end:
        pass
    time.sleep(0.010 - busy)
' "$duty" &
  hog_pid=$!
}

rate() {  # img/s of one run, or 0
  "$build/bin/nano-run" -n "$ranks" --backend mpi --output-ranks 0 -- "$build/bin/fashion_mnist_nano" \
    --batch-size 64 --epochs 1 --max-steps-per-epoch "$steps" --test-limit 500 "$@" 2>&1 |
    sed -n 's/.*nano-result: {"images_per_sec": \([0-9.]*\).*/\1/p' | tail -1 | grep . || echo 0
}

declare -A runs
for ((rep = 0; rep < repeats; rep++)); do
  for cond in quiet noisy; do
    [[ $cond == noisy ]] && start_hog
    runs[$cond,balanced]+=" $(rate)"
    runs[$cond,equal]+=" $(rate --equal-batches)"
    stop_hog
  done
done

median() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo "batch balancing: LeNet/Fashion-MNIST, nano-run -n $ranks --backend mpi, batch 64 per rank, $steps steps, median of $repeats"
printf "%-44s %15s %15s %16s\n" "condition" "balanced img/s" "equal img/s" "balanced/equal"
for cond in quiet noisy; do
  label="quiet cores"
  [[ $cond == noisy ]] && label="noisy neighbour: CPU $cpu ${duty}% busy"
  b=$(median <<<"${runs[$cond,balanced]}")
  e=$(median <<<"${runs[$cond,equal]}")
  printf "%-44s %15.1f %15.1f %15.3fx\n" "$label" "$b" "$e" "$(awk -v b="$b" -v e="$e" 'BEGIN {print (e > 0 ? b / e : 0)}')"
done
echo "runs (img/s): quiet balanced${runs[quiet,balanced]}; quiet equal${runs[quiet,equal]}; noisy balanced${runs[noisy,balanced]}; noisy equal${runs[noisy,equal]}"
