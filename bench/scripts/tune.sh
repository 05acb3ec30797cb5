#!/usr/bin/env bash
# How good and how costly `nano-run --tune` is: for ResNet-18 (resnet18_cifar, synthetic
# 3x32x32) and LeNet on Fashion-MNIST (fashion_mnist_nano), an exhaustive sweep of every
# candidate layout (this machine's rank counts x jemalloc and the C library's malloc), each a
# whole run timed by the program's own nano-result line, against the layout --tune picked (its
# throughput in the sweep, as a ratio to the sweep's best; goal >= 0.95), the tuning's cost in
# seconds, and how often repeated tunings agree. Sweep runs and tunings are interleaved, so a
# drift of the machine's speed hits both.
# Usage: scripts/bench.sh tune [BUILD_DIR] [TUNINGS] [SWEEPS]
#   TUNINGS  tunings per model (default 3)
#   SWEEPS   runs per layout in the sweep (default 2; the median counts)
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start tune "$@"
build=$(bench_build_dir "${1:-}")
for program in nano-run resnet18_cifar fashion_mnist_nano; do
  [[ -x $build/bin/$program ]] || { echo "bench tune: $build/bin/$program not built" >&2; exit 2; }
done
exec "$python" "$nano_root/bench/python/tune.py" "$build" "${2:-3}" "${3:-2}"
