#!/usr/bin/env bash
# All-reduce of a 44 MB float32 buffer on 2 ranks: nano's MPI path (under mpirun) vs nano's
# Gloo path (c10d ProcessGroupGloo, rendezvous over TCPStore) vs a memcpy of the same bytes.
# Median of REPS timed runs after 2 warm-ups. Goal: MPI <= 0.5 x Gloo.
# Usage: scripts/bench-allreduce.sh [BUILD_DIR] [MB] [REPS]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-${NANO_BUILD_DIR:-build}}
mb=${2:-44}
reps=${3:-15}
bin="$build/runtime/nano_bench_allreduce"
[[ -x $bin ]] || { echo "bench-allreduce: $bin not built (cmake --build $build --target nano_bench_allreduce)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1

mpi_out=$(mpirun -np 2 --bind-to core "$bin" "$mb" "$reps")

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
gloo_log=$(mktemp)
for r in 0 1; do
  RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    taskset -c "$r" "$bin" "$mb" "$reps" >>"$gloo_log" &
done
wait
gloo_out=$(cat "$gloo_log"); rm -f "$gloo_log"

get() { awk -v k="$2" '$1=="RESULT" && $2==k {print $'"$3"'}' <<<"$1" | head -1; }
mpi=$(get "$mpi_out" mpi 3); mpi_min=$(get "$mpi_out" mpi 4)
gloo=$(get "$gloo_out" gloo 3); gloo_min=$(get "$gloo_out" gloo 4)
memcpy=$(get "$mpi_out" memcpy 3); memcpy_min=$(get "$mpi_out" memcpy 4)
printf '\nall-reduce of %s MB float32, 2 ranks, median of %s (min)\n' "$mb" "$reps"
printf '%-28s %10s %10s\n' path "median ms" "min ms"
printf '%-28s %10s %10s\n' "nano MPI (Open MPI)" "$mpi" "$mpi_min"
printf '%-28s %10s %10s\n' "nano Gloo (c10d)" "$gloo" "$gloo_min"
printf '%-28s %10s %10s\n' "memcpy of the same bytes" "$memcpy" "$memcpy_min"
ratio=$(awk -v a="$mpi" -v b="$gloo" 'BEGIN{printf "%.2f", a/b}')
printf 'MPI / Gloo = %s (goal <= 0.50): %s\n' "$ratio" \
  "$(awk -v r="$ratio" 'BEGIN{print (r<=0.5)?"met":"NOT met"}')"
