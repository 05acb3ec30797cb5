#!/usr/bin/env bash
# The README's main command: install dependencies, build, and show what nano decides for this
# machine (and for a two-socket machine it does not have). Later steps train on real data.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${NANO_BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${NANO_DEMO_CMAKE_ARGS:-}
cmake --build "$build" -j "${NANO_JOBS:-$(nproc)}" --target nano-init
init="$build/bin/nano-init"

echo "== this machine (nano-init --show-topology)"
"$init" --show-topology
echo
echo "== its environment recipe (nano-init --explain)"
"$init" --explain
echo
# Two sockets, one NUMA node each, 8 cores x 2 hardware threads, numbered like Linux does
# (the SMT sibling of CPU i is CPU i+16).
indexes=$(for c in $(seq 0 15); do printf '%s%d,%d' "${sep:-}" "$c" $((c + 16)); sep=,; done)
two_socket="pack:2 [numa] core:8 pu:2(indexes=$indexes)"
echo "== 4 ranks on a two-socket machine, 8 cores x 2 threads each (nano-init --plan 4)"
"$init" --synthetic "$two_socket" --show-topology
"$init" --synthetic "$two_socket" --plan 4
