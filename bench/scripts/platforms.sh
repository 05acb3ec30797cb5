#!/usr/bin/env bash
# The benchmark on both platforms, interleaved on this machine: scripts/bench.sh training natively
# (Debian 12: libtorch 1.13, Open MPI 4.1) and in the Debian 13 root (libtorch 2.6, Open MPI 5;
# scripts/debian13-root.sh), RUNS times each, alternating, so both see the same machine in the
# same minutes. Each run's tables land in bench-results/platforms/debian{12,13}-run-N/results.md;
# at the end the key rows are printed side by side, as ranges over the runs. Needs root.
# The training knobs (NANO_BENCH_*) apply to both.
# A run that fails (training exits non-zero: some configuration failed) is kept as far as it
# got, and the next one starts; the exit status says whether any failed.
# Usage: scripts/bench.sh platforms [RUNS] [FIRST]   (default 2 runs, numbered from 1; FIRST
# adds runs to an earlier set, e.g. "1 2" makes run 2 only)
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start platforms "$@"
runs=${1:-2}
first=${2:-1}
[[ $runs =~ ^[1-9][0-9]*$ ]] || { echo "bench platforms: RUNS must be a positive integer, got '$runs'" >&2; exit 2; }
[[ $first =~ ^[1-9][0-9]*$ ]] || { echo "bench platforms: FIRST must be a positive integer, got '$first'" >&2; exit 2; }
last=$((first + runs - 1))
status=0
out=bench-results/platforms
mkdir -p "$out"
knobs=()
for v in $(compgen -e | grep '^NANO_BENCH_' || true); do
  [[ $v == NANO_BENCH_OUT ]] || knobs+=("$v=${!v}")
done
for ((r = first; r <= last; ++r)); do
  echo "bench platforms: run $r of $first-$last, Debian 12" >&2
  NANO_BENCH_OUT="$out/debian12-run-$r" scripts/bench.sh training || status=1
  echo "bench platforms: run $r of $first-$last, Debian 13" >&2
  scripts/debian13-root.sh env "${knobs[@]}" NANO_BUILD_DIR=build-debian13 NANO_BENCH_OUT="$out/debian13-run-$r" \
    scripts/bench.sh training || status=1
done
/usr/bin/python3 bench/python/platforms.py "$out" "$last"
exit $status
