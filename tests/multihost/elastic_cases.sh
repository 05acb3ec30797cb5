# shellcheck shell=bash disable=SC2154  # the variables are multihost_test.sh's
# Sourced by multihost_test.sh: the elastic cases (nano-run --min-hosts, docs/multihost.md,
# "Elastic runs"), on fault_rank with checkpoints every 10 steps in a folder the hosts share.
#   elastic_shrink    3 hosts x 1 rank; hostC dies for good mid-run (every process killed, its
#                     link down): the job finishes on 2 hosts, with the weights of a scripted run
#                     given the same world history (3 ranks to the checkpoint, then 2)
#   elastic_rejoin    the same with --host-lost-after 1 --rejoin; hostC boots again, and the 2 hosts
#                     stop at their next checkpoint, where the world grows back: 3, 2, 3 ranks, no
#                     step's work lost, the weights of the scripted run with that history
#   elastic_too_few   2 hosts, --min-hosts 2: hostB dies; nano-run ends, naming it, with 255
#   elastic_slow      hostC stopped (SIGSTOP) for less than the heartbeat timeout: never dropped
#   python_elastic    the Python API: @nano(num_processes=4, hosts="hostA:2,hostB:2", min_hosts=1,
#                     batch_policy="global", checkpoint_dir=...) loses hostB; hostA's 2 ranks resume
#                     from the 4 ranks' newest checkpoint (not from the start), each taking twice its
#                     batch, and the call returns rank 0's trained model
#   python_rejoin     the same with rejoin=True: hostB comes back, the 2 ranks stop at their next
#                     checkpoint once it is on disk, and the 4 ranks resume from that very step
# Each prints when the host was lost, when the smaller world took its first step, and the steps lost.

elastic_steps=100
elastic_opts=(--min-hosts 2 --max-restarts 3 --restart-delay 0.2 --grace-period 1 --heartbeat-timeout 5)

# start_elastic HOSTS DIR NANO-RUN-OPTIONS... -- FAULT_RANK-OPTIONS...: an elastic training on
# HOSTS in the background ($job), its checkpoints in DIR/run, rank 0's progress in DIR/progress.
start_elastic() {
  local hosts=$1 dir=$2 opts=()
  shift 2
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  timeout 200 bash "$testbed" run "$state" hostA "$nano_run" --hosts "$hosts" "${elastic_opts[@]}" "${opts[@]}" \
    "$fault_rank" --steps $elastic_steps --checkpoint-dir "$dir/run" --checkpoint-every 10 --print-weights \
    --progress "$dir/progress" "$@" > "$out" 2>&1 &
  job=$!
  started=$(date +%s.%N)
}

# wait_step DIR STEP: until rank 0 finished step STEP (bounded).
wait_step() {
  for _ in $(seq 1 1200); do
    [ "$(cut -d' ' -f1 "$1/progress" 2>/dev/null || echo 0)" -ge "$2" ] 2>/dev/null && return 0
    sleep 0.05
  done
  fail "rank 0 did not reach step $2: $(tail -3 "$out")"
}

# wait_line REGEX: until a line of $out matches (bounded); prints the time it came.
wait_line() {
  for _ in $(seq 1 1200); do
    grep -qE "$1" "$out" && { date +%s.%N; return 0; }
    sleep 0.05
  done
  fail "no line matching '$1': $(tail -3 "$out")"
  date +%s.%N
}

# kill_host HOST: the host dies for good: every process killed, its link down.
kill_host() {
  bash "$testbed" kill "$state" "$1"
  bash "$testbed" link "$state" "$1" down
}
revive_host() {
  bash "$testbed" revive "$state" "$1"
  bash "$testbed" link "$state" "$1" up
}

resumed_steps() { grep -ao '^\[rank 0\] fault_rank: rank 0 resumed at step [0-9]*' "$out" | grep -o '[0-9]*$'; }
weights() { grep -ao '^\[rank 0\] weights [0-9a-f]*' "$out" | tail -1 | cut -d' ' -f4; }

# scripted_run DIR HOSTS:STEPS...: the world history given from the start, one run per world,
# each resuming from the last's checkpoint in DIR; echoes the last run's weights.
scripted_run() {
  local dir=$1 part
  shift
  for part in "$@"; do
    run_a "$nano_run" --hosts "${part%=*}" "$fault_rank" --steps "${part#*=}" --checkpoint-dir "$dir" \
      --checkpoint-every 10 --print-weights
    [ $rc -eq 0 ] || fail "scripted run on ${part%=*} to step ${part#*=}: exit $rc: $(tail -3 "$out")"
  done
  weights
}

lost_line="hostC lost \((its shim's connection to nano-run closed|no word from its shim for [0-9]+ s: a cut link or a dead host); it does not answer\)"

elastic_case() {
  local dir at lost_at first_step c1 c2 elastic reference
  dir=$(mktemp -d /tmp/nano-multihost-elastic-XXXXXX)
  case "$1" in
  elastic_shrink)
    start_elastic hostA:1,hostB:1,hostC:1 "$dir" --
    wait_step "$dir" 25
    at=$(cut -d' ' -f1 "$dir/progress")
    lost_at=$(date +%s.%N)
    kill_host hostC
    first_step=$(wait_line "resumed at step")
    end_training
    show_judgement
    [ $rc -eq 0 ] || fail "exit $rc, expected 0 on the 2 hosts left: $(tail -5 "$out")"
    expect_line "^nano-run: $lost_line: the next attempt runs without it$"
    expect_line "^nano-run: going on with 2 hosts, 2 ranks \(hostA:1,hostB:1\)$"
    expect_line "^nano-run: worlds: attempt 1: hostA,hostB,hostC \(3 ranks\); attempt 2: hostA,hostB \(2 ranks\) after $lost_line$"
    c1=$(resumed_steps | head -1)
    elastic=$(weights)
    echo "hostC lost at step $at; the 2-host world resumed at step $c1, $(echo "$first_step - $lost_at" | bc) s after; $((at - c1)) steps lost"
    check_nothing_left hostC
    revive_host hostC
    reference=$(scripted_run "$dir/scripted" "hostA:1,hostB:1,hostC:1=$c1" "hostA:1,hostB:1=$elastic_steps")
    [[ "$elastic" =~ ^[0-9a-f]{16}$ ]] && [ "$elastic" = "$reference" ] || fail "weights: elastic '$elastic', scripted '$reference'"
    echo "weights $elastic, as the scripted run's (3 ranks to step $c1, then 2)"
    ;;
  elastic_rejoin)
    # hostC boots again while the 2 hosts train: nano-run, asking the hosts that left every 5 s,
    # finds it answers and asks the ranks to stop at their next checkpoint, where the world grows.
    elastic_steps=200
    start_elastic hostA:1,hostB:1,hostC:1 "$dir" --host-lost-after 1 --rejoin --timeline "$dir/trace.json" --
    wait_step "$dir" 25
    at=$(cut -d' ' -f1 "$dir/progress")
    kill_host hostC
    wait_line "^nano-run: going on with 2 hosts" > /dev/null
    revive_host hostC
    lost_at=$(date +%s.%N)
    end_training
    show_judgement
    [ $rc -eq 0 ] || fail "exit $rc, expected 0: $(tail -5 "$out")"
    expect_line "^nano-run: $lost_line, in 1 attempt in a row: it leaves the world$"
    expect_line "^nano-run: asking the ranks to stop at their next checkpoint, where the world changes$"
    expect_line "^nano-run: the ranks stopped at their checkpoint, as asked$"
    expect_line "^nano-run: hostC answers again: it rejoins the world$"
    expect_line "^nano-run: going on with 3 hosts, 3 ranks \(hostA:1,hostB:1,hostC:1\)$"
    expect_line "^nano-run: restart 2 of 3 in 0.2 s \(attempt 2 stopped at its checkpoint, as asked\)$"
    expect_line "^nano-run: worlds: attempt 1: hostA,hostB,hostC \(3 ranks\); attempt 2: hostA,hostB \(2 ranks\) after $lost_line; attempt 3: hostA,hostB,hostC \(3 ranks\) after hostC answers again$"
    # The timeline names each attempt's world and marks where it changed.
    /usr/bin/python3 - "$dir/trace.json" <<'PY' || fail "the trace does not mark the worlds"
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
names = [e["args"]["name"] for e in events if e["name"] == "process_name"]
marks = [e["name"] for e in events if e["ph"] == "i"]
assert names[0] == "attempt 0: hostA,hostB,hostC (3 ranks)", names
assert names[1].startswith("attempt 1: hostA,hostB (2 ranks) after hostC lost"), names
assert names[2] == "attempt 2: hostA,hostB,hostC (3 ranks) after hostC answers again", names
assert len(marks) == 2 and all(m.startswith("world changed: ") for m in marks), marks
PY
    expect_line "^nano-run: timeline: the world changed between attempts; attempt 2 ran on hostA,hostB,hostC \(3 ranks\) after hostC answers again$"
    c1=$(resumed_steps | sed -n 1p)
    c2=$(resumed_steps | sed -n 2p)
    stopped=$(grep -ao '^\[rank 0\] nano: stopping at the checkpoint of step [0-9]*' "$out" | grep -o '[0-9]*$')
    # No step's work lost: the grown world resumes at the very step the smaller one stopped.
    [ -n "$c2" ] && [ "$c2" = "$stopped" ] || fail "stopped at step '$stopped', resumed at '$c2'"
    elastic=$(weights)
    echo "hostC lost at step $at; 2 hosts from step $c1; hostC back: the 2 hosts stopped at step $stopped, 3 hosts from step $c2"
    check_nothing_left
    reference=$(scripted_run "$dir/scripted" "hostA:1,hostB:1,hostC:1=$c1" "hostA:1,hostB:1=$c2" \
      "hostA:1,hostB:1,hostC:1=$elastic_steps")
    [[ "$elastic" =~ ^[0-9a-f]{16}$ ]] && [ "$elastic" = "$reference" ] || fail "weights: elastic '$elastic', scripted '$reference'"
    echo "weights $elastic, as the scripted run's (3 ranks to step $c1, 2 to $c2, then 3)"
    ;;
  elastic_too_few)
    start_elastic hostA:1,hostB:1 "$dir" --
    wait_step "$dir" 10
    lost_at=$(date +%s.%N)
    kill_host hostB
    end_training
    show_judgement
    echo "hostB lost; nano-run ended $(echo "$(date +%s.%N) - $lost_at" | bc) s after"
    [ $rc -eq 255 ] || fail "exit $rc, expected 255: $(tail -5 "$out")"
    expect_line "^nano-run: root cause: hostB lost \((its shim's connection to nano-run closed|no word from its shim for [0-9]+ s: a cut link or a dead host); it does not answer\): 1 host left, fewer than --min-hosts 2; nano-run exits with 255$"
    check_nothing_left hostB
    ;;
  elastic_slow)
    # Stopped for 3 s, under the heartbeat timeout of 5 s: slow, not lost.
    start_elastic hostA:1,hostB:1,hostC:1 "$dir" --
    wait_step "$dir" 20
    pids=$(leftovers hostC | cut -d' ' -f1)
    for p in $pids; do kill -STOP "$p" 2>/dev/null; done
    sleep 3
    for p in $pids; do kill -CONT "$p" 2>/dev/null; done
    end_training
    show_judgement
    [ $rc -eq 0 ] || fail "exit $rc, expected 0: $(tail -5 "$out")"
    grep -qE "^nano-run: (.* lost|restart|going on)" "$out" && fail "a stopped host was taken as lost: $(grep '^nano-run:' "$out")"
    [ -z "$(resumed_steps)" ] || fail "the job restarted"
    echo "hostC stopped for 3 s (heartbeat timeout 5 s): one attempt, 3 hosts throughout"
    check_nothing_left
    ;;
  python_elastic | python_rejoin)
    local mode=shrink resumed stopped
    [ "$1" = python_rejoin ] && mode=rejoin
    timeout 170 bash "$testbed" run "$state" hostA env PYTHONPATH="$build/lib/nano/python" \
      /usr/bin/python3 "$here/python_elastic.py" "$mode" "$dir/run" > "$out" 2>&1 &
    job=$!
    started=$(date +%s.%N)
    wait_line "^training on 4 ranks" > /dev/null
    # Past the first checkpoint (5 steps of 50 ms, and the ranks' start).
    sleep 2
    kill_host hostB
    if [ "$mode" = rejoin ]; then
      wait_line "^training on 2 ranks" > /dev/null
      revive_host hostB
    fi
    end_training
    show_judgement
    grep -E "^(training|returned)|nano_torch: (resumed|stopping)" "$out"
    [ $rc -eq 0 ] || fail "exit $rc: $(tail -5 "$out")"
    # From the 4 ranks' checkpoint, not from the start.
    expect_line "^nano_torch: resumed from $dir/run/ckpt-[0-9.a-f]*nano \(step [1-9][0-9]*, written by 4 ranks, this run has 2\)$"
    expect_line "^training on 2 ranks$"
    if [ "$mode" = rejoin ]; then
      expect_line "^nano-run: hostB answers again: it rejoins the world$"
      stopped=$(grep -ao '^nano_torch: stopping at the checkpoint of step [0-9]*' "$out" | grep -o '[0-9]*$')
      resumed=$(grep -ao 'resumed from .* (step [0-9]*, written by 2 ranks, this run has 4)' "$out" | grep -o 'step [0-9]*' | grep -o '[0-9]*')
      # No step's work lost: the grown world resumes at the very step the smaller one stopped.
      [ -n "$stopped" ] && [ "$stopped" = "$resumed" ] || fail "stopped at step '$stopped', resumed at '$resumed'"
      echo "hostB back: the 2 ranks stopped at the checkpoint of step $stopped, the 4 ranks resumed from it"
      # The global batch: 4 ranks x 4 samples again; the rate's target 4 x 0.1.
      expect_line "^returned 4 batch 4 lr 0.4 trained True$"
      check_nothing_left
    else
      # The global batch kept: 2 ranks x 8 samples, as the 4 ranks' 4 each; the rate's target 4 x 0.1.
      expect_line "^returned 2 batch 8 lr 0.4 trained True$"
      check_nothing_left hostB
    fi
    ;;
  esac
  rm -rf "$dir"
}

# Shows nano-run's own lines of the elastic run (the log says what was judged).
show_judgement() { grep -aE '^nano-run: (root cause|.* lost|.* answers|going on|worlds|restart)' "$out" | sed 's/^/  | /'; }
