#!/bin/bash
# nano-run --timeline end to end, with real ranks: timeline_test.sh BUILD CASE
#   straggler    2 ranks of fault_rank, rank 1 sleeping 60 ms in each step and both ranks with
#                OMP_NUM_THREADS=2 on one CPU: the report names rank 1 the straggler with its
#                CPUs, the placement check names both ranks oversubscribed; the trace parses,
#                with one track per rank, every phase inside its step, and the steps' sum equal
#                to the wall time they span (within 1%); the records folder is gone
#   phases       2 ranks of the Fashion-MNIST example under nano-run: data, compute and
#                exchange are recorded, and each step's phases sum to no more than the step
#   torch_nano   the same example launching its own ranks with TorchNanoOptions::timeline
#   restart      a rank killed in the first attempt: the trace holds both attempts
#   interrupt    Ctrl-C (SIGINT to nano-run) mid-run: exit 130, and the trace is valid JSON
#   unwritable   a path in a missing folder: one line naming it, exit 2, no rank started
#   stock_ddp    a stock PyTorch DDP program on the nano backend: its all-reduces are recorded,
#                and on torch 2 (optimizer step hooks) its 6 steps; on torch 1.13 "no steps seen"
#   python_api   TorchNano with rank 1 sleeping 30 ms in each forward: rank 1 is the straggler,
#                each rank's 30 steps hold data, compute and exchange, rank 0 waits on rank 1;
#                @nano, and TorchNano on the gloo process group backend: their 30 steps
#   report       nano-report tells the run's report again, line for line, and draws a PNG; a file
#                that is not a trace is one line and exit 2
set -u
build=$1
case_=$2
here=$(cd "$(dirname "$0")" && pwd)
nano_run=$build/bin/nano-run
fault_rank=$build/tests/faults/fault_rank
fashion=$build/bin/fashion_mnist_nano
py=/usr/bin/python3
work=$(mktemp -d /tmp/nano-timeline-XXXXXX)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail() { echo "FAIL: $case_: $*"; exit 1; }
trace=$work/trace.json

# run ARGS...: nano-run's stderr in $work/err, its exit code in $rc (bounded).
run() {
  timeout 240 "$@" > "$work/out" 2> "$work/err"
  rc=$?
}
expect() { grep -qE -- "$1" "$work/err" || { cat "$work/err"; fail "no line matching: $1"; }; }
# check_trace RANKS ATTEMPTS: the trace parses, with a track per rank and a process per attempt,
# and every phase lies inside a step of its track.
check_trace() {
  "$py" - "$trace" "$1" "$2" <<'PY' || fail "the trace does not check out (above)"
import json, sys
trace, ranks, attempts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
events = json.load(open(trace))["traceEvents"]
tracks = {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name" and not e["args"]["name"].endswith("collectives")}
processes = {e["pid"] for e in events if e["name"] == "process_name"}
assert len(processes) == attempts, f"{len(processes)} attempts in the trace, expected {attempts}"
assert len(tracks) == ranks * attempts, f"{len(tracks)} rank tracks, expected {ranks * attempts}"
steps = {}
for e in events:
    if e["ph"] == "X" and e["cat"] == "step":
        steps.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["ts"] + e["dur"]))
for e in events:
    if e["ph"] == "X" and e["cat"] == "phase":
        inside = any(s - 0.002 <= e["ts"] and e["ts"] + e["dur"] <= t + 0.002 for s, t in steps[(e["pid"], e["tid"])])
        assert inside, f"phase {e} lies outside every step of its track"
print(f"trace: {len(events)} events, {len(tracks)} rank tracks, {len(processes)} attempts")
PY
}

case $case_ in
straggler)
  run "$nano_run" -n 2 --threads 2 --timeline "$trace" "$fault_rank" --steps 40 --slow 1:60
  [ $rc -eq 0 ] || { cat "$work/err"; fail "exit $rc"; }
  expect "^nano-run: timeline: straggler: rank 1 \([^,]+, CPUs 1(, NUMA [0-9-]+)?\) takes [0-9.]+x the median rank's time per step outside the exchange; the other ranks wait [0-9]+% of each step on it$"
  expect "^nano-run: timeline: placement: rank 0 \([^,]+, CPUs 0\): OMP_NUM_THREADS=2 is more threads than its 1 CPU"
  expect "^nano-run: timeline: placement: rank 1 \([^,]+, CPUs 1\): OMP_NUM_THREADS=2 is more threads than its 1 CPU"
  check_trace 2 1
  "$py" - "$trace.report.json" <<'PY' || fail "the report's JSON does not check out (above)"
import json, sys
report = json.load(open(sys.argv[1]))
assert report["straggler"]["rank"] == 1, report["straggler"]
for r in report["ranks"]:
    assert r["steps"] == 40, r
    total = sum(r["shares"].values())
    assert abs(total - 1) < 1e-6, f"rank {r['rank']}'s shares add up to {total}"
# The slow rank's 60 ms is the others' exchange wait: at least half of it, on this machine.
waits = [r["shares"]["exchange"] * r["median_step_ms"] for r in report["ranks"] if r["rank"] != 1]
assert min(waits) > 30, f"rank 0 waited {waits} ms per step on a rank 60 ms slower"
PY
  "$py" - "$trace" <<'PY' || fail "the steps' sum is not the wall time they span (above)"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
for tid in (0, 2):
    steps = sorted((e["ts"], e["dur"]) for e in events if e.get("cat") == "step" and e["tid"] == tid)
    wall = steps[-1][0] + steps[-1][1] - steps[0][0]
    total = sum(d for _, d in steps)
    assert abs(total - wall) <= 0.01 * wall, f"track {tid}: steps sum to {total} us, their span is {wall} us"
PY
  [ ! -e "$trace.records" ] || fail "the records folder was left behind"
  ;;
phases)
  run "$nano_run" -n 2 --timeline "$trace" "$fashion" --epochs 1 --max-steps-per-epoch 40 --test-limit 200
  [ $rc -eq 0 ] || { cat "$work/err"; fail "exit $rc"; }
  check_trace 2 1
  "$py" - "$trace" <<'PY' || fail "the phases do not check out (above)"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["name"] for e in events if e.get("cat") == "phase"}
assert {"data", "compute", "exchange"} <= names, f"phases recorded: {names}"
for e in events:
    if e.get("cat") != "step":
        continue
    a = e["args"]
    phases = a["data_ms"] + a["compute_ms"] + a["exchange_ms"] + a["checkpoint_ms"]
    assert phases <= e["dur"] / 1000 * 1.001 + 0.01, f"{e['name']}: phases {phases} ms in a {e['dur'] / 1000} ms step"
collectives = [e for e in events if e.get("cat") == "collective"]
assert collectives and all("bytes" in e["args"] for e in collectives), "no collectives recorded"
PY
  expect "^nano-run: timeline: rank 0 .*: step [0-9.]+ ms median .*: data [0-9]+%, compute [0-9]+%, exchange wait [0-9]+%"
  ;;
torch_nano)
  run "$fashion" --num-processes 2 --timeline "$trace" --epochs 1 --max-steps-per-epoch 20 --test-limit 200
  [ $rc -eq 0 ] || { cat "$work/err"; fail "exit $rc"; }
  check_trace 2 1
  expect "^nano-run: timeline: $trace \(2 ranks, 20 steps"
  ;;
restart)
  run "$nano_run" -n 2 --max-restarts 1 --restart-delay 0 --timeline "$trace" "$fault_rank" --steps 20 \
    --fault kill@step:5@1@0
  [ $rc -eq 0 ] || { cat "$work/err"; fail "exit $rc"; }
  check_trace 2 2
  expect "^nano-run: timeline: $trace \(2 ranks, 20 steps, attempt 1;"
  ;;
interrupt)
  timeout 120 "$nano_run" -n 2 --timeline "$trace" "$fault_rank" --steps 100000 > "$work/out" 2> "$work/err" &
  pid=$!
  for _ in $(seq 100); do grep -q "" "$trace" 2>/dev/null; sleep 0.1; [ -d "$trace.records" ] && break; done
  sleep 3
  kill -INT $pid
  wait $pid
  rc=$?
  [ $rc -eq 130 ] || { cat "$work/err"; fail "exit $rc, expected 130"; }
  check_trace 2 1
  ;;
unwritable)
  run "$nano_run" -n 2 --timeline "$work/missing/trace.json" "$fault_rank" --pid-dir "$work" --steps 3
  [ $rc -eq 2 ] || { cat "$work/err"; fail "exit $rc, expected 2"; }
  [ "$(cat "$work/err")" = "nano-run: cannot write --timeline $work/missing/trace.json: No such file or directory (see docs/timeline.md)" ] ||
    { cat "$work/err"; fail "not the one line expected"; }
  ! ls "$work"/rank-*.pid >/dev/null 2>&1 || fail "a rank started"
  ;;
stock_ddp)
  run "$nano_run" -n 2 --timeline "$trace" "$py" "$here/../../python/torch_backend/ddp_train.py" --backend nano \
    --steps 6 --out "$work/model.pt"
  [ $rc -eq 0 ] || { cat "$work/err"; fail "exit $rc"; }
  if "$py" -c "import sys, torch.optim.optimizer as o; sys.exit(not hasattr(o, 'register_optimizer_step_post_hook'))"; then
    expect "^nano-run: timeline: $trace \(2 ranks, 6 steps;"
    expect "^nano-run: timeline: rank 1 \(.*\): step [0-9.]+ ms median .*: data 0%, compute [0-9]+%, exchange wait [0-9]+%"
  else
    expect "^nano-run: timeline: rank 1 \(.*\): no steps seen; [1-9][0-9]* collectives recorded$"
  fi
  "$py" - "$trace" <<'PY' || fail "no all-reduce in the trace (above)"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
reduces = [e for e in events if e.get("cat") == "collective" and e["name"].startswith("all_reduce(")]
assert len(reduces) >= 12, f"{len(reduces)} all-reduces recorded for 6 steps on 2 ranks"
PY
  ;;
python_api)
  PYTHONPATH=$build/lib/nano/python run "$py" "$here/python_api.py" "$trace" lite 30
  [ $rc -eq 0 ] || { cat "$work/err"; fail "TorchNano: exit $rc"; }
  expect "^nano-run: timeline: $trace \(2 ranks, 30 steps;"
  expect "^nano-run: timeline: straggler: rank 1 \([^,]+, CPUs 1(, NUMA [0-9-]+)?\) takes"
  check_trace 2 1
  "$py" - "$trace" "$trace.report.json" <<'PY' || fail "the Python API's phases do not check out (above)"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
for tid in (0, 2):
    names = {e["name"] for e in events if e.get("cat") == "phase" and e["tid"] == tid}
    assert {"data", "compute", "exchange"} <= names, f"track {tid}'s phases: {names}"
report = json.load(open(sys.argv[2]))
for r in report["ranks"]:
    assert r["steps"] == 30, r
# rank 1's 30 ms is rank 0's exchange wait: at least half of it, on this machine.
wait = [r["shares"]["exchange"] * r["median_step_ms"] for r in report["ranks"] if r["rank"] == 0][0]
assert wait > 15, f"rank 0 waited {wait} ms per step on a rank 30 ms slower"
PY
  for kind in decorated lite-gloo; do
    PYTHONPATH=$build/lib/nano/python run "$py" "$here/python_api.py" "$trace" $kind
    [ $rc -eq 0 ] || { cat "$work/err"; fail "$kind: exit $rc"; }
    expect "^nano-run: timeline: $trace \(2 ranks, 30 steps;"
    expect "^nano-run: timeline: rank 1 \(.*\): step [0-9.]+ ms median .*: data [0-9]+%, compute [0-9]+%, exchange wait [0-9]+%"
  done
  ;;
report)
  run "$nano_run" -n 2 --timeline "$trace" "$fault_rank" --steps 30 --slow 1:30
  [ $rc -eq 0 ] || { cat "$work/err"; fail "exit $rc"; }
  grep "^nano-run: timeline: " "$work/err" | sed 's/^nano-run: //' > "$work/told"
  timeout 60 "$build/bin/nano-report" "$trace" > "$work/again" 2> "$work/err"
  rc=$?
  [ $rc -eq 0 ] || { cat "$work/err"; fail "nano-report exited $rc"; }
  head -n -1 "$work/again" | diff "$work/told" - || fail "nano-report's report differs from nano-run's (above)"
  [ "$(tail -1 "$work/again")" = "picture: $work/trace.png" ] || fail "no picture line: $(tail -1 "$work/again")"
  [ "$(head -c 8 "$work/trace.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "trace.png is no PNG"
  [ "$(stat -c %s "$work/trace.png")" -gt 10000 ] || fail "trace.png is nearly empty"
  echo '{"traceEvents": []}' > "$work/other.json"
  timeout 60 "$build/bin/nano-report" "$work/other.json" > /dev/null 2> "$work/err"
  rc=$?
  [ $rc -eq 2 ] && [ "$(wc -l < "$work/err")" -eq 1 ] && grep -q "^nano-report: $work/other.json: not a trace" "$work/err" ||
    { cat "$work/err"; fail "a file that is no trace: exit $rc"; }
  ;;
*)
  fail "unknown case"
  ;;
esac
echo "PASS: $case_"
