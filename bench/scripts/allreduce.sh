#!/usr/bin/env bash
# All-reduce of a 44 MB float32 buffer on 2 ranks: nano's MPI communicator (under mpirun) and
# nano's Gloo communicator (rendezvous over TCPStore), both of which reduce through shared
# memory on one host, vs c10d ProcessGroupGloo's own all-reduce (NANO_SHM_BYTES=0: what
# PyTorch DDP on CPU uses) vs a memcpy of the same bytes.
# Median of REPS timed runs after 2 warm-ups. Goal: nano MPI <= 0.5 x c10d Gloo.
# Usage: scripts/bench.sh allreduce [BUILD_DIR] [MB] [REPS]
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start allreduce "$@"
build=$(bench_build_dir "${1:-}")
mb=${2:-44}
reps=${3:-15}
bin="$build/bench/nano_bench_allreduce"
[[ -x $bin ]] || { echo "bench allreduce: $bin not built (cmake --build $build --target nano_bench_allreduce)" >&2; exit 2; }
export OMP_NUM_THREADS=1

mpi_out=$(mpirun -np 2 --bind-to core "$bin" "$mb" "$reps")

gloo_out=$(gloo_pair -- "$bin" "$mb" "$reps")
c10d_out=$(gloo_pair NANO_SHM_BYTES=0 -- "$bin" "$mb" "$reps")

get() { awk -v k="$2" '$1=="RESULT" && $2==k {print $'"$3"'}' <<<"$1" | head -1; }
mpi=$(get "$mpi_out" mpi 3); mpi_min=$(get "$mpi_out" mpi 4)
gloo=$(get "$gloo_out" gloo 3); gloo_min=$(get "$gloo_out" gloo 4)
c10d=$(get "$c10d_out" gloo 3); c10d_min=$(get "$c10d_out" gloo 4)
memcpy=$(get "$mpi_out" memcpy 3); memcpy_min=$(get "$mpi_out" memcpy 4)
printf '\nall-reduce of %s MB float32, 2 ranks, median of %s (min)\n' "$mb" "$reps"
printf '%-34s %10s %10s\n' path "median ms" "min ms"
printf '%-34s %10s %10s\n' "nano MPI (shared memory)" "$mpi" "$mpi_min"
printf '%-34s %10s %10s\n' "nano Gloo (shared memory)" "$gloo" "$gloo_min"
printf '%-34s %10s %10s\n' "c10d ProcessGroupGloo (TCP)" "$c10d" "$c10d_min"
printf '%-34s %10s %10s\n' "memcpy of the same bytes" "$memcpy" "$memcpy_min"
ratio=$(awk -v a="$mpi" -v b="$c10d" 'BEGIN{printf "%.2f", a/b}')
printf 'nano MPI / c10d Gloo = %s (goal <= 0.50): %s\n' "$ratio" \
  "$(awk -v r="$ratio" 'BEGIN{print (r<=0.5)?"met":"NOT met"}')"
printf 'nano Gloo / c10d Gloo = %s\n' "$(awk -v a="$gloo" -v b="$c10d" 'BEGIN{printf "%.2f", a/b}')"
