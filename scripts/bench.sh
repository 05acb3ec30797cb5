#!/usr/bin/env bash
# The benchmarks' one entry point: scripts/bench.sh SUBCOMMAND [ARGS...]; each body lives in
# bench/scripts/SUBCOMMAND.sh, which shares bench/scripts/common.sh; their Python helpers are in
# bench/python/ and the C++ benchmark programs in bench/programs/ (bench/README.md).
# With no subcommand it runs `training` (the full side-by-side run).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

usage() {
  cat <<'USAGE'
Usage: scripts/bench.sh [SUBCOMMAND [ARGS...]]     (no subcommand = training)
       scripts/bench.sh SUBCOMMAND --help          what it measures, its arguments and knobs

Subcommands:
  training     side-by-side training throughput (LeNet, ResNet-18) of 1 process, nano-run -n k
               and PyTorch DDP, plus launcher, allreduce, ddp and balance; writes bench-results/
  allreduce    [BUILD_DIR] [MB] [REPS]          2-rank all-reduce: nano MPI, nano Gloo, c10d Gloo
  balance      [BUILD_DIR] [STEPS] [REPEATS] [DUTY]   batch balancing against a noisy neighbour
  checkpoint   [BUILD_DIR] [REPEATS]            checkpoint cost and death-to-resumed time
  ddp          [BUILD_DIR] [LENET_STEPS] [RESNET_STEPS]   DDP step overhead and peak RSS
  elastic      [BUILD_DIR] [RUNS]               a host lost for good and back: time to the new world, work lost (root)
  launcher     [BUILD_DIR] [RUNS]               nano-run start-up against mpirun and run_cpu
  multihost    [BUILD_DIR] [MB] [REPS]          one host against two (namespace test bed; root)
  platforms    [RUNS] [FIRST]                   training on Debian 12 and 13, interleaved (root)
  precision    [RUNS]                           fp32, bf16, channels_last, bf16 gradients on both platforms (root)
  precision-spread [BUILD_DIR] [SEEDS] [STEPS]  bf16 and channels_last against fp32 over seeds (the tests' bounds)
  python-api   [BUILD_DIR] [RUNS] [LENET_STEPS] [RESNET_STEPS] [GB]   TorchNano/@nano against stock DDP; overhead; memory
  torch-backend [BUILD_DIR] [REPS] [REPEATS]    stock PyTorch on the nano torch backend against gloo
  signature-cost BEFORE_BUILD AFTER_BUILD [TURNS]   the collectives' signature check: its cost, before/after
  scaling      [--ranks 1,2,4,8,16] [--budget S]  stock DDP at 1..N ranks, gloo against nano (needs only torch)
  timeline     [BUILD_DIR] [REPEATS]            --timeline's cost (on/off) and the phase shares it reports
  tune         [BUILD_DIR] [TUNINGS] [SWEEPS]   nano-run --tune's pick against an exhaustive sweep, its cost

BUILD_DIR defaults to $NANO_BUILD_DIR, else build.
USAGE
}

case ${1:-training} in
  -h | --help | help) usage ;;
  training | allreduce | balance | checkpoint | ddp | elastic | launcher | multihost | platforms | precision | precision-spread | python-api | scaling | signature-cost | timeline | torch-backend | tune)
    name=${1:-training}
    shift || true
    exec bash "$here/../bench/scripts/$name.sh" "$@" ;;
  *)
    echo "bench: unknown subcommand '$1' (see scripts/bench.sh --help)" >&2
    exit 2 ;;
esac
