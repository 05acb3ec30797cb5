#!/usr/bin/env bash
# The timeline's cost and what it shows: LeNet (fashion_mnist_nano, real Fashion-MNIST) and
# ResNet-18 (resnet18_cifar, synthetic 3x32x32) under nano-run -n 1 and -n 2, with --timeline off
# and on in turn (REPEATS pairs, so both see the same load), batch 64 per rank; the img/s of each,
# the ratio on/off (the median of the pairs' ratios, with their range), and the phase shares of
# rank 0 from the last run's report. Then the recorder's own cost per step, timed alone
# (nano_bench_timeline: a step's calls, in the detailed steps and in the aggregated ones), as a
# share of the shortest step above. Goal: at most 1% of the step time.
# Usage: scripts/bench.sh timeline [BUILD_DIR] [REPEATS] [LENET_STEPS] [RESNET_STEPS]
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start timeline "$@"
build=$(bench_build_dir "${1:-}")
repeats=${2:-3}
lenet_steps=${3:-300}
resnet_steps=${4:-12}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# run MODEL N MODE: one run's img/s on stdout ("" when it failed); MODE on leaves the report in
# $work/trace.json.report.json.
run() {
  local model=$1 n=$2 mode=$3 timeline=()
  [[ $mode == on ]] && timeline=(--timeline "$work/trace.json")
  local program=("$build/bin/fashion_mnist_nano" --epochs 1 --max-steps-per-epoch "$lenet_steps" --test-limit 100)
  [[ $model == resnet18 ]] && program=("$build/bin/resnet18_cifar" --steps "$resnet_steps")
  "$build/bin/nano-run" -n "$n" "${timeline[@]}" "${program[@]}" 2>/dev/null |
    sed -n 's/.*nano-result: .*"images_per_sec": \([0-9.]*\).*/\1/p' | tail -1
}

median() { printf "%s\n" "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# range VALUES...: "LOW-HIGH"
range() { printf "%s\n" "$@" | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%.3f-%.3f", lo, hi }'; }
shortest_ms=1e9
printf "\n%-9s %3s %12s %12s %8s %13s   %s\n" model n "off img/s" "on img/s" "on/off" "pair range" \
  "rank 0 with the timeline: data / compute / exchange wait / checkpoint / other"
for model in lenet resnet18; do
  for n in 1 2; do
    offs=() ons=() ratios=()
    for ((i = 0; i < repeats; i++)); do
      off=$(run "$model" "$n" off)
      on=$(run "$model" "$n" on)
      [[ -n $off && -n $on ]] || { echo "bench timeline: a $model -n $n run failed" >&2; exit 1; }
      offs+=("$off") ons+=("$on") ratios+=("$(awk -v a="$on" -v b="$off" 'BEGIN { print a / b }')")
    done
    shares=$(/usr/bin/python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["ranks"][0]["shares"]
print(" / ".join(f"{100 * r[k]:.0f}%" for k in ("data", "compute", "exchange", "checkpoint", "other")))' \
      "$work/trace.json.report.json")
    printf "%-9s %3d %12.1f %12.1f %8.3f %13s   %s\n" "$model" "$n" "$(median "${offs[@]}")" "$(median "${ons[@]}")" \
      "$(median "${ratios[@]}")" "$(range "${ratios[@]}")" "$shares"
    # 64 images per rank per step
    shortest_ms=$(awk -v s="$shortest_ms" -v n="$n" -v r="$(median "${offs[@]}")" 'BEGIN { m = 64 * n / r * 1000; print (m < s) ? m : s }')
  done
done

[[ -x $build/bench/nano_bench_timeline ]] || { echo "bench timeline: nano_bench_timeline not built" >&2; exit 2; }
on=$(NANO_TIMELINE=$work "$build/bench/nano_bench_timeline" on 200000)
off=$("$build/bench/nano_bench_timeline" off 200000)
echo "$on $off" | awk -v step="$shortest_ms" '{
  printf "\nrecorder per step (batch, forward, exchange wait, 2 all-reduces, step end): %.2f us in the detailed steps, %.2f us after them, %.3f us off\n", $3 / 1000, $4 / 1000, $8 / 1000
  printf "that is %.3f%% of the shortest step above (%.1f ms); 1%% of a step is reached by steps of %.2f ms\n", $3 / 1e6 / step * 100, step, $3 / 1e6 * 100 }'

# The Python API's part, timed alone (bench/python/timeline_python.py: the calls of a step and
# the backend's notes of each collective, a small DDP model on the nano backend in a world of one),
# off and on in turn, REPEATS pairs of 5000 steps.
py_steps=() ; diffs=()
for ((i = 0; i < repeats; i++)); do
  off=$(PYTHONPATH=$build/lib/nano/python /usr/bin/python3 bench/python/timeline_python.py 5000 | awk '{ print $(NF-3) }')
  on=$(NANO_TIMELINE=$work PYTHONPATH=$build/lib/nano/python /usr/bin/python3 bench/python/timeline_python.py 5000 |
    awk '{ print $(NF-3) }')
  py_steps+=("$off") diffs+=("$(awk -v a="$on" -v b="$off" 'BEGIN { print a - b }')")
done
mapfile -t sorted < <(printf "%s\n" "${diffs[@]}" | sort -g)
awk -v m="$(median "${diffs[@]}")" -v n="${#diffs[@]}" -v lo="${sorted[0]}" -v hi="${sorted[-1]}" \
  -v step="$(median "${py_steps[@]}")" -v short="$shortest_ms" 'BEGIN {
    printf "Python API per step: %.1f us more with the timeline on (median of %d pairs, from %.1f to %.1f us; a step of this small model takes %.0f us); %.3f%% of the shortest step above\n", m, n, lo, hi, step, m / 1000 / short * 100 }'
