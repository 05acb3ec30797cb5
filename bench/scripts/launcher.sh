#!/usr/bin/env bash
# Launcher start-up cost: median wall time over several runs of starting two no-op ranks with
# nano-run (both backends), plain mpirun, and PyTorch's CPU launcher; plus nano-run's own peak
# resident memory while supervising.
# Usage: scripts/bench.sh launcher [BUILD_DIR] [RUNS]
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start launcher "$@"
build=$(bench_build_dir "${1:-}")
runs=${2:-9}
nano_run="$build/bin/nano-run"
[ -x "$nano_run" ] || { echo "bench launcher: $nano_run not built" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo 'pass' > "$tmp/noop.py"

# median_ms CMD...: runs CMD $runs times (after one warm-up) and prints the median in ms.
median_ms() {
  "$@" >/dev/null 2>&1 || true
  local times=()
  for _ in $(seq "$runs"); do
    local t0 t1
    t0=$(date +%s%N)
    "$@" >/dev/null 2>&1 || true
    t1=$(date +%s%N)
    times+=($(( (t1 - t0) / 1000000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'
}

root_flag=""
[ "$(id -u)" = 0 ] && root_flag="--allow-run-as-root"
sub=$(median_ms "$nano_run" -n 2 --backend subprocess /bin/true)
mpi=$(median_ms "$nano_run" -n 2 --backend mpi /bin/true)
plain=$(median_ms mpirun -np 2 --oversubscribe $root_flag /bin/true)
torch=$(median_ms "$python" -m torch.backends.xeon.run_cpu --ninstances 2 "$tmp/noop.py")

# Peak RSS of nano-run itself (VmHWM) while it supervises two sleeping ranks.
rss_of() {
  "$nano_run" -n 2 --backend "$1" /bin/sleep 1 >/dev/null 2>&1 &
  local pid=$! hwm=""
  sleep 0.7
  hwm=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
  wait "$pid" || true
  echo "${hwm:-?}"
}
rss_sub=$(rss_of subprocess)
rss_mpi=$(rss_of mpi)

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
echo "launcher start-up: 2 ranks of a no-op, median of $runs runs on $(nproc) cores"
printf '%-52s %10s %12s %12s\n' "command" "median ms" "vs mpirun" "vs run_cpu"
row() { printf '%-52s %10s %12s %12s\n' "$1" "$2" "$(ratio "$2" "$plain")x" "$(ratio "$2" "$torch")x"; }
row "nano-run -n 2 --backend subprocess /bin/true" "$sub"
row "nano-run -n 2 --backend mpi /bin/true" "$mpi"
row "mpirun -np 2 /bin/true" "$plain"
row "python3 -m torch.backends.xeon.run_cpu --ninstances 2" "$torch"
echo
echo "PyTorch CPU launcher / nano-run: subprocess $(ratio "$torch" "$sub")x faster, mpi $(ratio "$torch" "$mpi")x faster"
echo "nano-run mpi / plain mpirun: $(ratio "$mpi" "$plain")x (goal <= 1.5x)"
echo "nano-run peak RSS while supervising (VmHWM): subprocess ${rss_sub} kB, mpi ${rss_mpi} kB"
