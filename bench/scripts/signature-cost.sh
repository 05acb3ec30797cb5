#!/usr/bin/env bash
# What the collectives' signature check costs: the same all-reduces through two builds, one
# without the check (BEFORE_BUILD, e.g. of the commit before it) and one with it (AFTER_BUILD),
# interleaved in turns so that the machine's drift hits both alike. Per turn: the `nano` torch
# backend's all_reduce of 4 bytes (2000 in a row) and of 4 MB (bench/python/signature_cost.py,
# 2 ranks pinned one per core), the same through its Gloo path (NANO_SHM_BYTES=0, as across
# hosts: the signatures take one more small Gloo all-gather), and nano's C++ Gloo communicator
# over shared memory at 4 MB
# (nano_bench_allreduce). Prints each figure's median over the turns with its range, and the
# ratio after/before. Goal: no measurable cost at 4 MB, at most 2 us more for 4 bytes.
# Usage: scripts/bench.sh signature-cost BEFORE_BUILD AFTER_BUILD [TURNS]   (default 5)
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start signature-cost "$@"
before=${1:-}
after=${2:-}
turns=${3:-5}
[[ -n $before && -n $after ]] || { echo "bench signature-cost: usage: scripts/bench.sh signature-cost BEFORE_BUILD AFTER_BUILD [TURNS]" >&2; exit 2; }
[[ $turns =~ ^[1-9][0-9]*$ ]] || { echo "bench signature-cost: TURNS must be a positive integer, got '$turns'" >&2; exit 2; }
for b in "$before" "$after"; do
  [[ -f $b/lib/nano/python/nano_torch/__init__.py && -x $b/bench/nano_bench_allreduce ]] ||
    { echo "bench signature-cost: $b lacks nano_torch or bench/nano_bench_allreduce (cmake --build $b --target nano_torch_ext nano_bench_allreduce)" >&2; exit 2; }
done
export OMP_NUM_THREADS=1 USE_LIBUV=0
results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((t = 1; t <= turns; ++t)); do
  for side in before after; do
    b=$before
    [[ $side == after ]] && b=$after
    gloo_pair PYTHONPATH="$b/lib/nano/python" -- "$python" bench/python/signature_cost.py 5 |
      awk -v s="$side" '$1 == "RESULT" { print s, "torch-" $2, $3 }' >> "$results"
    # The Gloo path (across hosts, or NANO_SHM_BYTES=0): signatures in one more Gloo all-gather.
    gloo_pair NANO_SHM_BYTES=0 PYTHONPATH="$b/lib/nano/python" -- "$python" bench/python/signature_cost.py 5 |
      awk -v s="$side" '$1 == "RESULT" { print s, "gloo-" $2, $3 }' >> "$results"
    gloo_pair -- "$b/bench/nano_bench_allreduce" 4 15 |
      awk -v s="$side" '$1 == "RESULT" && $2 == "gloo" { print s, "cpp-4MB", $3 * 1000 }' >> "$results"
  done
  echo "bench signature-cost: turn $t of $turns done" >&2
done
echo "signature check, before and after, $turns turns interleaved ($(date -u +%F), $(getconf _NPROCESSORS_ONLN) CPUs, torch $("$python" -c 'import torch; print(torch.__version__)'))"
printf '%-34s %16s %16s %8s\n' "all-reduce, 2 ranks" "before us" "after us" "ratio"
"$python" - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    side, name, us = line.split()
    rows.setdefault(name, {}).setdefault(side, []).append(float(us))
labels = {"torch-4B": "torch backend, 4 bytes", "torch-4MB": "torch backend, 4 MB",
          "gloo-4B": "torch backend via Gloo, 4 bytes", "gloo-4MB": "torch backend via Gloo, 4 MB",
          "cpp-4MB": "C++ Gloo communicator, 4 MB"}
for name in ("torch-4B", "torch-4MB", "gloo-4B", "gloo-4MB", "cpp-4MB"):
    b, a = rows[name]["before"], rows[name]["after"]
    mb, ma = statistics.median(b), statistics.median(a)
    print(f"{labels[name]:<34} {mb:8.2f} ({min(b):.1f}-{max(b):.1f}) {ma:8.2f} ({min(a):.1f}-{max(a):.1f}) {ma / mb:8.3f}")
PY
