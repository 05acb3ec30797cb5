#!/usr/bin/env bash
# What crossing hosts costs, on the namespace test bed (tests/multihost/testbed.sh). The hosts are
# namespaces of ONE machine: they share its cores and memory, and their "network" is a veth bridge
# in the kernel.
#  1. nano's C++ communicators: 2 ranks on one "host" against 1 rank on each of 2 "hosts", the
#     all-reduce of a MB-sized float32 buffer (median of REPS) and LeNet training on
#     Fashion-MNIST (img/s): the overhead of the TCP path between hosts against shared memory.
#  2. The `nano` torch backend against Gloo across hosts whose links are shaped (tc tbf on each
#     host's eth0, RATES, e.g. 1gbit,10gbit), so that the link and not this VM's memory is the
#     bottleneck as on a cluster: all-reduces of 4 and MB MB, float32 on both and bfloat16 on
#     nano (Debian's Gloo cannot sum it), at 2 hosts x 2 ranks, 3 x 2 and 3 x 1; with the MB each
#     host sent per all-reduce, counted on its interface, against the algorithm's count,
#     2(H-1)/H of the tensor's bytes per host (hierarchical, or a ring of one rank per host);
#     float32 broadcasts from rank 0 and all-gathers (MB in all) of the same sizes, on both; then stock DDP LeNet and ResNet-18 img/s on nano and on Gloo at 2 x 2. (This kernel has no
#     netem: the links add no latency.)
# Needs root.
# Usage: scripts/bench.sh multihost [BUILD_DIR] [MB] [REPS] [RATES]
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start multihost "$@"
build=$(cd "$(bench_build_dir "${1:-}")" && pwd)
mb=${2:-44}
reps=${3:-15}
rates=${4:-1gbit,10gbit}
here=$PWD
state=/run/nano-bench-multihost-$$
trap 'bash "$here/tests/multihost/testbed.sh" down "$state"' EXIT
bash tests/multihost/testbed.sh up "$state" 3
export NANO_TESTBED=$state OMPI_MCA_plm_rsh_agent=$here/tests/multihost/agent.sh OMPI_MCA_plm_rsh_no_tree_spawn=1
export PRTE_MCA_plm_ssh_agent=$here/tests/multihost/agent.sh PRTE_MCA_plm_ssh_no_tree_spawn=1
on_a() { bash tests/multihost/testbed.sh run "$state" hostA "$@"; }

printf '%-10s %-22s %12s %12s %12s\n' comm placement "allreduce ms" "min ms" "LeNet img/s"
for comm in mpi gloo; do
  for placement in "one host" "two hosts"; do
    hosts=()
    [ "$placement" = "two hosts" ] && hosts=(--hosts hostA:1,hostB:1)
    out=$(on_a env NANO_BACKEND=$comm OMP_NUM_THREADS=1 "$build/bin/nano-run" -n 2 --backend mpi "${hosts[@]}" \
      "$build/bench/nano_bench_allreduce" "$mb" "$reps" 2>&1)
    line=$(grep -o "RESULT $comm [0-9.]* [0-9.]*" <<<"$out" | head -1)
    train=$(on_a env NANO_BACKEND=$comm "$build/bin/nano-run" -n 2 --backend mpi "${hosts[@]}" "$build/bin/fashion_mnist_nano" \
      --epochs 1 --max-steps-per-epoch 60 --batch-size 64 --test-limit 500 2>&1 |
      grep -o '"images_per_sec": [0-9.]*' | grep -o '[0-9.]*$' || echo "-")
    printf '%-10s %-22s %12s %12s %12s\n' "$comm" "$placement" "$(cut -d' ' -f3 <<<"$line")" \
      "$(cut -d' ' -f4 <<<"$line")" "$train"
  done
done

# 2. The torch backend across shaped links.
pydir=$build/lib/nano/python
declare -A cpp ddp
shape() {
  local h
  for h in hostA hostB hostC; do
    bash tests/multihost/testbed.sh run "$state" "$h" tc qdisc replace dev eth0 root tbf rate "$1" burst 1mb \
      latency 100ms || { echo "multihost: cannot shape eth0 on $h to $1" >&2; exit 1; }
  done
}
echo
printf '%-7s %-8s %5s %9s %9s %9s %11s %11s %10s %10s %10s\n' link hosts MB "nano ms" "bf16 ms" "gloo ms" \
  "nano/gloo" "bf16/gloo" "nano MB/h" "algo MB/h" "gloo MB/h"
for rate in ${rates//,/ }; do
  shape "$rate"
  for layout in hostA:2,hostB:2 hostA:2,hostB:2,hostC:2 hostA:1,hostB:1,hostC:1; do
    n=0 h=0
    for part in ${layout//,/ }; do n=$((n + ${part#*:})) h=$((h + 1)); done
    out=$(on_a "$build/bin/nano-run" -n "$n" --hosts "$layout" --env GLOO_SOCKET_IFNAME=eth0 --env OMP_NUM_THREADS=1 \
      --env PYTHONPATH="$pydir" "$python" "$here/bench/python/torch_allreduce.py" --sizes "4,$mb" --reps "$reps" \
      --dtypes float32,bfloat16 --link-bytes --broadcast --all-gather 2>&1 | sed 's/^\[rank [0-9]*\] //') ||
      { echo "$out" | tail -5 >&2; exit 1; }
    for size in 4 "$mb"; do
      get() { awk -v b="$1" -v s="$size" '$1=="RESULT" && $2==b && $3==s {print $'"$2"'}' <<<"$out" | head -1; }
      nano=$(get torch-nano 4) bf16=$(get torch-nano-bf16 4) gloo=$(get torch-gloo 4)
      printf '%-7s %-8s %5s %9s %9s %9s %11.2f %11.2f %10s %10.2f %10s\n' "$rate" "${h}x$((n / h))" "$size" \
        "$nano" "$bf16" "$gloo" "$(bc -l <<<"$nano / $gloo")" "$(bc -l <<<"$bf16 / $gloo")" "$(get torch-nano 7)" \
        "$(bc -l <<<"2 * ($h - 1) / $h * $size")" "$(get torch-gloo 7)"
      # Broadcast from rank 0: hierarchical on nano sends the bytes once per other host.
      printf '%-7s %-8s %5s   broadcast: nano %s ms, gloo %s ms (%.2f); MB per host: nano %s, gloo %s\n' "$rate" \
        "${h}x$((n / h))" "$size" "$(get torch-nano-broadcast 4)" "$(get torch-gloo-broadcast 4)" \
        "$(bc -l <<<"$(get torch-nano-broadcast 4) / $(get torch-gloo-broadcast 4)")" "$(get torch-nano-broadcast 7)" \
        "$(get torch-gloo-broadcast 7)"
      # All-gather of MB in all: hierarchical on nano, each host's inputs cross to each other host once.
      printf '%-7s %-8s %5s   all_gather: nano %s ms, gloo %s ms (%.2f); MB per host: nano %s, gloo %s\n' "$rate" \
        "${h}x$((n / h))" "$size" "$(get torch-nano-all_gather 4)" "$(get torch-gloo-all_gather 4)" \
        "$(bc -l <<<"$(get torch-nano-all_gather 4) / $(get torch-gloo-all_gather 4)")" \
        "$(get torch-nano-all_gather 7)" "$(get torch-gloo-all_gather 7)"
    done
    # nano's C++ communicators, the same layout and MB (ms, median; their own checks of the sums).
    for comm in mpi gloo; do
      for dtype in float32 bfloat16; do
        line=$(on_a env NANO_BACKEND=$comm OMP_NUM_THREADS=1 "$build/bin/nano-run" -n "$n" --backend mpi \
          --hosts "$layout" "$build/bench/nano_bench_allreduce" "$mb" "$reps" "$dtype" 2>&1 |
          grep -o "RESULT $comm [0-9.]*" | head -1) || true
        cpp[$comm-$dtype]=${line##* }
      done
    done
    printf '%-7s %-8s %5s   C++ communicators: mpi %s ms (bf16 %s), gloo %s ms (bf16 %s)\n' "$rate" "${h}x$((n / h))" \
      "$mb" "${cpp[mpi-float32]:--}" "${cpp[mpi-bfloat16]:--}" "${cpp[gloo-float32]:--}" "${cpp[gloo-bfloat16]:--}"
    [ "$layout" = hostA:2,hostB:2 ] || continue
    # Stock DDP, the same layout: LeNet (one 0.2 MB bucket) and ResNet-18 (45 MB of gradients).
    for model in lenet resnet18; do
      steps=40
      [ $model = resnet18 ] && steps=8
      for backend in gloo nano; do
        line=$(on_a "$build/bin/nano-run" -n "$n" --hosts "$layout" --output-ranks 0 --env GLOO_SOCKET_IFNAME=eth0 \
          --env PYTHONPATH="$pydir" "$python" "$here/bench/python/pytorch_ddp.py" $model --steps $steps \
          --warmup 3 --dist-backend $backend 2>&1 | sed -n 's/.*nano-result: //p')
        ddp[$backend]=$("$python" -c 'import json, sys; print("%.1f" % json.loads(sys.argv[1])["images_per_sec"])' \
          "$line" 2>/dev/null || echo -)
      done
      printf '%-7s %-8s   stock DDP %-8s img/s: nano %s, gloo %s\n' "$rate" "${h}x$((n / h))" $model "${ddp[nano]}" \
        "${ddp[gloo]}"
    done
  done
done
