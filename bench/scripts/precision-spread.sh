#!/usr/bin/env bash
# How far bf16 training and bf16 gradient exchange end from fp32 after STEPS steps, over seeds:
# the spread that tests/examples/precision.sh's bounds are derived from. For each seed (the
# initial weights), fashion_mnist_nano trains STEPS steps on 2 ranks with equal batches of 128
# (as the test does; 469 is the whole epoch) in fp32, bf16 and with bf16 gradients, and 30
# steps of 64 in the default layout and channels_last; prints each final test accuracy (and the
# 30-step loss) and the differences, then their range. One platform per call (run it in the
# Debian 13 root for the other).
# Usage: scripts/bench.sh precision-spread [BUILD_DIR] [SEEDS] [STEPS]   (default 8 seeds: 0..7;
#        STEPS default 150, the test's)
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start precision-spread "$@"
build=$(bench_build_dir "${1:-}")
seeds=${2:-8}
[[ $seeds =~ ^[1-9][0-9]*$ ]] || { echo "bench precision-spread: SEEDS must be a positive integer, got '$seeds'" >&2; exit 2; }
steps=${3:-150}
[[ $steps =~ ^[1-9][0-9]*$ ]] || { echo "bench precision-spread: STEPS must be a positive integer, got '$steps'" >&2; exit 2; }
program="$build/bin/fashion_mnist_nano"
[[ -x $program ]] || { echo "bench precision-spread: $program not built" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() {  # run SEED NAME ARGS...: prints "accuracy loss"
  local seed=$1 name=$2
  shift 2
  "$program" --num-processes 2 --equal-batches --seed "$seed" "$@" > "$work/$name" 2>&1 ||
    { cat "$work/$name" >&2; echo "bench precision-spread: seed $seed, $name failed" >&2; exit 1; }
  echo "$(sed -n 's/.*final test accuracy \([0-9.]*\);.*/\1/p' "$work/$name" | tail -1)" \
    "$(sed -n 's/.*epoch [0-9]*\/[0-9]*: loss \([0-9.]*\),.*/\1/p' "$work/$name" | tail -1)"
}
printf '%-5s %8s %8s %8s %9s %9s | %8s %8s %9s %9s\n' seed fp32 bf16 bf16grad "bf16-fp32" "grad-fp32" \
  "acc30" "acc30cl" "dacc30" "dloss30"
for ((s = 0; s < seeds; ++s)); do
  full=(--epochs 1 --batch-size 128 --max-steps-per-epoch "$steps")
  read -r fp32 _ < <(run "$s" fp32 "${full[@]}")
  read -r bf16 _ < <(run "$s" bf16 "${full[@]}" --precision bf16)
  read -r grad _ < <(run "$s" grad "${full[@]}" --bf16-gradients)
  read -r a30 l30 < <(run "$s" short --epochs 1 --max-steps-per-epoch 30 --batch-size 64)
  read -r c30 cl30 < <(run "$s" short_cl --epochs 1 --max-steps-per-epoch 30 --batch-size 64 --channels-last)
  awk -v s="$s" -v f="$fp32" -v b="$bf16" -v g="$grad" -v a="$a30" -v c="$c30" -v l="$l30" -v m="$cl30" \
    'BEGIN { printf "%-5s %8.4f %8.4f %8.4f %+9.4f %+9.4f | %8.4f %8.4f %+9.4f %+9.5f\n", s, f, b, g, b-f, g-f, a, c, c-a, m-l }'
done | tee "$work/table"
awk '{ for (i = 5; i <= 6; ++i) { if (NR == 1 || $i < lo[i]) lo[i] = $i; if (NR == 1 || $i > hi[i]) hi[i] = $i }
       for (i = 10; i <= 11; ++i) { if (NR == 1 || $i < lo[i]) lo[i] = $i; if (NR == 1 || $i > hi[i]) hi[i] = $i } }
     END { printf "range over %d seeds ('"$steps"' steps): bf16-fp32 %+.4f..%+.4f, bf16 gradients-fp32 %+.4f..%+.4f, " \
                  "channels_last-default at 30 steps: accuracy %+.4f..%+.4f, loss %+.5f..%+.5f\n",
                  NR, lo[5], hi[5], lo[6], hi[6], lo[10], hi[10], lo[11], hi[11] }' "$work/table"
