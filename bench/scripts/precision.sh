#!/usr/bin/env bash
# What TorchNano's precision options buy, on both platforms, interleaved on this machine:
# training throughput of ResNet-18 (resnet18_cifar, synthetic 3x32x32) and LeNet on
# Fashion-MNIST (fashion_mnist_nano) at nano-run -n 1 and -n 2 in fp32, bf16, channels_last,
# bf16 with channels_last, and bf16 gradient exchange (-n 2 only), each as a ratio to fp32
# measured in the same minute; LeNet's final test accuracy after 3 epochs on 2 ranks in each
# (equal batches: deterministic on one machine, so measured in the first run only); and stock
# PyTorch with ONEDNN_DEFAULT_FPMATH_MODE=BF16 (oneDNN's implicit down-conversion) against
# without. Runs alternate Debian 12 (natively: libtorch 1.13) and Debian 13 (its root,
# scripts/debian13-root.sh: libtorch 2.6); the table gives each figure as a range over the runs.
# Writes bench-results/precision/. Needs root for the Debian 13 side.
# Usage: scripts/bench.sh precision [RUNS]   (default 2)
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start precision "$@"
runs=${1:-2}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "bench precision: RUNS must be a positive integer, got '$runs'" >&2; exit 2; }
out=bench-results/precision
mkdir -p "$out"
status=0
for ((r = 1; r <= runs; ++r)); do
  accuracy=$([[ $r == 1 ]] && echo accuracy || echo no-accuracy)
  echo "bench precision: run $r of $runs, Debian 12" >&2
  "$python" bench/python/precision.py measure build "$out/debian12-run-$r.json" "$accuracy" || status=1
  echo "bench precision: run $r of $runs, Debian 13" >&2
  scripts/debian13-root.sh /usr/bin/python3 bench/python/precision.py measure build-debian13 \
    "$out/debian13-run-$r.json" "$accuracy" || status=1
done
"$python" bench/python/precision.py report "$out" "$runs" | tee "$out/results.md"
exit $status
