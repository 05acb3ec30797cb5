#!/usr/bin/env bash
# Checkpoints and restarts: (1) checkpoint size, the time training is held per checkpoint, the
# background write and a restore, for LeNet and ResNet-18 with Adam, and the step-time overhead
# that gives at one checkpoint a minute and every 10 s; (2) the time from a rank's death to the
# first step after resuming under nano-run --max-restarts (2 ranks, both backends), in parts:
# teardown (death -> root cause), restart delay, start-up and restore (restart -> resumed); (3) what
# the seal costs: a 1 GiB state written, sealed and fsynced through the checkpoint engine and
# verified and loaded, beside torch.save+fsync and torch.load of the same tensors alone, REPEATS
# runs interleaved, and the seal's own speed (bench/python/checkpoint_seal.py; NANO_SEAL_GB sets
# the size).
# Goals: overhead <= 2% at one checkpoint a minute; death to resumed <= 10 s; sealing adds at most
# 10% to writing and loading.
# Usage: scripts/bench.sh checkpoint [BUILD_DIR] [REPEATS]
set -euo pipefail
# shellcheck source=bench/scripts/common.sh
source "$(dirname "$0")/common.sh"
bench_start checkpoint "$@"
build=$(bench_build_dir "${1:-}")
repeats=${2:-3}
bin=$build/bench/nano_bench_checkpoint
fault_rank=$build/tests/faults/fault_rank
for f in "$bin" "$fault_rank" "$build/bin/nano-run"; do
  [[ -x $f ]] || { echo "bench checkpoint: $f not built (cmake --build $build)" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$bin" "$work/ckpt" 5
echo
echo "death to resumed: 2 ranks of fault_rank (checkpoint every 5 steps), rank 1 SIGKILLed in step 20, --restart-delay 1, median of $repeats"
printf '%-10s %12s %12s %16s %12s\n' backend "teardown s" "delay s" "start+load s" "total s"
for backend in subprocess mpi; do
  for ((i = 0; i < repeats; ++i)); do
    rm -rf "$work/run"
    /usr/bin/python3 - "$build/bin/nano-run" "$backend" "$fault_rank" "$work/run" <<'PY' >>"$work/$backend.txt"
import subprocess, sys, time
nano_run, backend, fault_rank, ckpt = sys.argv[1:]
p = subprocess.Popen([nano_run, "-n", "2", "--backend", backend, "--max-restarts", "1", "--restart-delay", "1",
                      "--grace-period", "2", fault_rank, "--steps", "30", "--checkpoint-dir", ckpt,
                      "--checkpoint-every", "5", "--fault", "kill@step:20@1@0"],
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
t = {}
for line in p.stdout:
    now = time.monotonic()
    if "injecting 'kill'" in line: t.setdefault("death", now)
    elif "root cause" in line: t.setdefault("cause", now)
    elif "restart 1 of 1" in line: t.setdefault("restart", now)
    elif "rank 0 resumed at step" in line: t.setdefault("resumed", now)
p.wait()
if p.returncode != 0 or len(t) < 4:
    print("failed", p.returncode, t, file=sys.stderr)
    sys.exit(1)
delay = 1.0
print(t["cause"] - t["death"], delay, t["resumed"] - t["restart"] - delay, t["resumed"] - t["death"])
PY
  done
  sort -n -k4 "$work/$backend.txt" | awk -v b="$backend" -v n="$repeats" 'NR == int((n + 1) / 2) {printf "%-10s %12.2f %12.2f %16.2f %12.2f\n", b, $1, $2, $3, $4}'
done
echo
mkdir -m 700 "$work/seal"
/usr/bin/python3 "$(dirname "$0")/../python/checkpoint_seal.py" "$build/lib/nano/python" "$work/seal" \
  "$((repeats > 3 ? repeats : 3))" "${NANO_SEAL_GB:-1}"
