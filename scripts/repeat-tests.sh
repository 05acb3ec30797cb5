#!/usr/bin/env bash
# Runs the ctest tests matching REGEX N times in a loop and counts each one's failures: how a
# test that compares an accuracy, a loss or a time is checked for failing on noise (goal: 0 of
# 20 on both platforms). Each round runs the tests one at a time, beside nothing else that this
# script starts. For the Debian 13 leg: scripts/debian13-root.sh scripts/repeat-tests.sh ...
# Usage: scripts/repeat-tests.sh N REGEX [BUILD_DIR]   (BUILD_DIR: $NANO_BUILD_DIR, else build)
#   prints one line per round, then "repeat-tests: NAME: F of N failed" per test; exit 1 if any failed.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-}
regex=${2:-}
build=${3:-${NANO_BUILD_DIR:-build}}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "repeat-tests: N must be a positive integer, got '$rounds'" >&2; exit 2; }
[ -n "$regex" ] || { echo "repeat-tests: usage: scripts/repeat-tests.sh N REGEX [BUILD_DIR]" >&2; exit 2; }
[ -d "$build" ] || { echo "repeat-tests: no build folder $build" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mapfile -t names < <(ctest --test-dir "$build" -N -R "$regex" | sed -n 's/^ *Test *#[0-9]*: //p')
[ ${#names[@]} -gt 0 ] || { echo "repeat-tests: no test matches '$regex'" >&2; exit 2; }
declare -A failed
for name in "${names[@]}"; do failed[$name]=0; done
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
for ((r = 1; r <= rounds; ++r)); do
  SECONDS=0
  ctest --test-dir "$build" -R "$regex" --timeout 900 > "$logs/round" 2>&1 || true
  bad=$(sed -n 's/^[[:space:]]*[0-9]* - \(.*\) (\(Failed\|Timeout\|Not Run\|Exception\|SEGFAULT\|Subprocess aborted\)).*/\1/p' "$logs/round")
  for name in $bad; do
    failed[$name]=$((failed[$name] + 1))
    cp "$logs/round" "$logs/failed-$name-$r"
  done
  echo "repeat-tests: round $r of $rounds (${SECONDS} s): ${bad:-no failure}" | tr '\n' ' '
  echo
done
status=0
for name in "${names[@]}"; do
  echo "repeat-tests: $name: ${failed[$name]} of $rounds failed"
  if [ "${failed[$name]}" -gt 0 ]; then
    status=1
    for f in "$logs"/failed-"$name"-*; do tail -40 "$f"; done
  fi
done
exit $status
