#!/usr/bin/env bash
# PyTorch's own distributed test suite (distributed_test.py, shipped with python3-torch) on the
# `nano` backend beside Gloo: both backends at each world size, then a table of passed/skipped/
# failed and every test whose outcome differs (tests/python/torch_suite/). The tests run only
# nano's side (python.torch_suite.N); this is the comparison. For Debian 13:
# scripts/debian13-root.sh scripts/torch-suite.sh build-debian13
# Usage: scripts/torch-suite.sh [BUILD_DIR] [SIZES]   (BUILD_DIR: $NANO_BUILD_DIR, else build;
#   SIZES: comma-separated world sizes, default 2,3,4); writes bench-results/torch-suite-CODENAME/
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-${NANO_BUILD_DIR:-build}}
sizes=${2:-2,3,4}
[ -d "$build/lib/nano/python/nano_torch" ] || { echo "torch-suite: $build has no nano_torch module (build it first)" >&2; exit 2; }
[[ $sizes =~ ^[2-9](,[2-9])*$ ]] || { echo "torch-suite: SIZES must be world sizes 2-9, comma-separated, got '$sizes'" >&2; exit 2; }
build=$(cd "$build" && pwd)
out=$(pwd)/bench-results/torch-suite-$( . /etc/os-release && echo "${VERSION_CODENAME:-unknown}")
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
files=()
for n in ${sizes//,/ }; do
  for backend in gloo nano; do
    (cd "$work" && /usr/bin/python3 "$OLDPWD/tests/python/torch_suite/suite.py" "$build" "$backend" "$n" \
       --json "$out/$backend-$n.json" > "$out/$backend-$n.log" 2>&1) ||
      { echo "torch-suite: $backend at $n ranks failed to run: $(tail -3 "$out/$backend-$n.log")" >&2; exit 1; }
    tail -1 "$out/$backend-$n.log"
    files+=("$out/$backend-$n.json")
  done
done
/usr/bin/python3 tests/python/torch_suite/compare.py "${files[@]}" | tee "$out/table.md"
