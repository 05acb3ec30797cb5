#!/usr/bin/env bash
# What crossing hosts costs, on the namespace test bed (tests/multihost/testbed.sh): 2 ranks on
# one "host" against 1 rank on each of 2 "hosts", for both communicators: the all-reduce of a
# MB-sized float32 buffer (median of REPS) and LeNet training on Fashion-MNIST (img/s). The
# hosts are namespaces of ONE machine: they share its cores and memory, and their "network" is
# a veth bridge in the kernel, so this shows the overhead of the TCP path between hosts against
# shared memory within one, not a cluster's speed-up. Needs root.
# Usage: scripts/bench.sh multihost [BUILD_DIR] [MB] [REPS]
set -euo pipefail
# shellcheck source=scripts/bench/common.sh
source "$(dirname "$0")/common.sh"
bench_start multihost "$@"
build=$(cd "$(bench_build_dir "${1:-}")" && pwd)
mb=${2:-44}
reps=${3:-15}
here=$PWD
state=/run/nano-bench-multihost-$$
trap 'bash "$here/tests/multihost/testbed.sh" down "$state"' EXIT
bash tests/multihost/testbed.sh up "$state" 2
export NANO_TESTBED=$state OMPI_MCA_plm_rsh_agent=$here/tests/multihost/agent.sh OMPI_MCA_plm_rsh_no_tree_spawn=1
export PRTE_MCA_plm_ssh_agent=$here/tests/multihost/agent.sh PRTE_MCA_plm_ssh_no_tree_spawn=1
on_a() { bash tests/multihost/testbed.sh run "$state" hostA "$@"; }

printf '%-10s %-22s %12s %12s %12s\n' comm placement "allreduce ms" "min ms" "LeNet img/s"
for comm in mpi gloo; do
  for placement in "one host" "two hosts"; do
    hosts=()
    [ "$placement" = "two hosts" ] && hosts=(--hosts hostA:1,hostB:1)
    out=$(on_a env NANO_BACKEND=$comm OMP_NUM_THREADS=1 "$build/bin/nano-run" -n 2 "${hosts[@]}" \
      "$build/runtime/nano_bench_allreduce" "$mb" "$reps" 2>&1)
    line=$(grep -o "RESULT $comm [0-9.]* [0-9.]*" <<<"$out" | head -1)
    train=$(on_a env NANO_BACKEND=$comm "$build/bin/nano-run" -n 2 "${hosts[@]}" "$build/bin/fashion_mnist_nano" \
      --epochs 1 --max-steps-per-epoch 60 --batch-size 64 --test-limit 500 2>&1 |
      grep -o '"images_per_sec": [0-9.]*' | grep -o '[0-9.]*$' || echo "-")
    printf '%-10s %-22s %12s %12s %12s\n' "$comm" "$placement" "$(cut -d' ' -f3 <<<"$line")" \
      "$(cut -d' ' -f4 <<<"$line")" "$train"
  done
done
