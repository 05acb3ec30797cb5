#!/usr/bin/env bash
# The Python API (nano_torch.TorchNano, @nano) against the stock DDP script under nano-run and
# one process on all cores; its launch overhead; the whole job's peak memory with a 1 GB
# in-memory dataset at 1, 2 and 4 ranks (bench/python/python_api.py says how each is measured).
# Goals: >= 0.97x the stock DDP script in every model; the call adds <= 1 s over nano-run;
# memory at most the dataset once plus each process's own.
# Usage: scripts/bench.sh python-api [BUILD_DIR] [RUNS] [LENET_STEPS] [RESNET_STEPS] [GB]
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start python-api "$@"
build=$(bench_build_dir "${1:-}")
[[ -f $build/lib/nano/python/nano_torch/torch_nano.py ]] || { echo "bench python-api: $build/lib/nano/python/nano_torch not built" >&2; exit 2; }
exec "$python" bench/python/python_api.py "$build" --runs "${2:-2}" --lenet-steps "${3:-60}" \
  --resnet-steps "${4:-6}" --gb "${5:-1}"
