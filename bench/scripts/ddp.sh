#!/usr/bin/env bash
# DDP overhead: per-rank step time with gradient sync (nano::DistributedDataParallel) over
# the same step without it (no_sync(), alternating steps in one process so both see the same
# load), batch 64 per rank, 2 ranks, for a LeNet-style CNN (1x28x28) and ResNet-18
# (3x32x32); each rank's peak RSS with DDP and without it (a separate run with no DDP).
# Both communicators: MPI (mpirun) and Gloo; ranks get nano-init's recipe with one thread.
# Goals: LeNet <= 1.05, ResNet-18 <= 1.10.
# Usage: scripts/bench.sh ddp [BUILD_DIR] [LENET_STEPS] [RESNET_STEPS]
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start ddp "$@"
build=$(bench_build_dir "${1:-}")
lenet_steps=${2:-40}
resnet_steps=${3:-4}
bin="$build/bench/nano_bench_ddp"
[[ -x $bin ]] || { echo "bench ddp: $bin not built (cmake --build $build --target nano_bench_ddp)" >&2; exit 2; }
# Ranks run with the environment nano-run gives them (allocator, one thread each): peak RSS
# depends on the allocator, and glibc's varies by tens of MB from run to run.
[[ -x $build/bin/nano-init ]] || { echo "bench ddp: $build/bin/nano-init not built" >&2; exit 2; }
eval "$("$build/bin/nano-init" --threads 1)"

results=$(mktemp)
trap 'rm -f "$results"' EXIT
run_mpi() { mpirun -np 2 --bind-to core "$bin" "$@" >>"$results"; }
run_gloo() { gloo_pair -- "$bin" "$@" >>"$results"; }
for comm in mpi gloo; do
  for model in lenet resnet18; do
    steps=$lenet_steps; [[ $model == resnet18 ]] && steps=$resnet_steps
    "run_$comm" "$model" ddp "$steps"
    "run_$comm" "$model" local 1   # memory baseline only
  done
done

# RESULT model mode comm rank sync_ms nosync_ms rss
# "vs slowest": a synchronous step cannot beat the slowest rank's local step, so the DDP step is
# also compared with the slowest rank's no-sync step; the per-rank ratio of a faster rank also
# counts its wait for the slower one (the machine's imbalance, not the all-reduce).
awk '
$1=="RESULT" { key=$2" "$4; sync[key" "$3" "$5]=$6; nosync[key" "$3" "$5]=$7; rss[key" "$3" "$5]=$8; seen[key]=1
               if ($3 == "ddp" && $7 > slowest[key]) slowest[key] = $7 }
END {
  printf "\n%-9s %-5s %5s %11s %9s %7s %11s %6s %18s %16s\n", "model", "comm", "rank", "no sync ms", "DDP ms", "ratio", "vs slowest", "goal", "peak RSS no DDP MB", "peak RSS DDP MB"
  split("lenet resnet18", models, " "); split("mpi gloo", comms, " ")
  for (m = 1; m <= 2; m++) for (c = 1; c <= 2; c++) for (r = 0; r <= 1; r++) {
    k = models[m]" "comms[c]
    if (!(k in seen)) continue
    a = nosync[k" ddp "r]; b = sync[k" ddp "r]
    goal = models[m] == "lenet" ? 1.05 : 1.10
    printf "%-9s %-5s %5d %11.2f %9.2f %7.3f %11.3f %6.2f %18.1f %16.1f\n", models[m], comms[c], r, a, b, b / a, b / slowest[k], goal, rss[k" local "r], rss[k" ddp "r]
  }
}' "$results"
