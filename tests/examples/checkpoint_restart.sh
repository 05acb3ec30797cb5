#!/bin/bash
# fashion_mnist_nano end to end on real data: a run whose rank 1 is SIGKILLed after its first
# checkpoint and restarted (--max-restarts 1) resumes from the checkpoint and ends with the
# same final test accuracy, and the same nano-result line, as a run that never failed.
#   checkpoint_restart.sh PROGRAM [ARGS...]   (PROGRAM: fashion_mnist_nano or fashion_mnist_decorator)
set -u
program=$1
shift
work=$(mktemp -d /tmp/nano-ckpt-e2e-XXXXXX)
trap 'rm -rf "$work"' EXIT
# Sized for what it checks (a kill after the first checkpoint, a resume, an exact equality), not
# for accuracy: 2 short epochs (an epoch boundary to resume across), 500 test images.
steps=20
args=(--num-processes 2 --epochs 2 --max-steps-per-epoch $steps --batch-size 32 --test-limit 500
      --equal-batches --checkpoint-every 10 "$@")

fail() { echo "FAIL: $*"; exit 1; }

timeout 240 "$program" "${args[@]}" --checkpoint-dir "$work/plain" > "$work/plain.out" 2>&1 ||
  { cat "$work/plain.out"; fail "the uninterrupted run failed"; }

timeout 240 "$program" "${args[@]}" --checkpoint-dir "$work/failed" --max-restarts 1 > "$work/failed.out" 2>&1 &
run=$!
# Rank 1 of the first attempt: a process of this run with RANK=1 and no NANO_RESTART_COUNT=1.
victim=""
for _ in $(seq 1 1200); do
  if compgen -G "$work/failed/ckpt-*.nano" > /dev/null; then
    for pid in $(pgrep -f -- "--checkpoint-dir $work/failed"); do
      env=$(tr '\0' '\n' < /proc/$pid/environ 2>/dev/null)
      if grep -qx 'RANK=1' <<< "$env" && ! grep -qx 'NANO_RESTART_COUNT=1' <<< "$env"; then victim=$pid; fi
    done
    [ -n "$victim" ] && break
  fi
  kill -0 $run 2>/dev/null || break
  sleep 0.05
done
[ -n "$victim" ] || { wait $run; cat "$work/failed.out"; fail "no checkpoint appeared while rank 1 ran"; }
kill -KILL "$victim"
echo "killed rank 1 (pid $victim) after $(ls "$work/failed" | grep -c '^ckpt-') checkpoint(s)"
wait $run
rc=$?
cat "$work/failed.out"
[ $rc -eq 0 ] || fail "the restarted run exited with $rc"
grep -q "restart 1 of 1" "$work/failed.out" || fail "no restart"
grep -q "resuming from checkpoint $work/failed/ckpt-" "$work/failed.out" || fail "the restart did not resume from a checkpoint"
# The resumed epoch's display goes on from the checkpoint's batch to the epoch's end and says so once.
step=$(grep -o "resuming from checkpoint [^ ]* (step [0-9]*)" "$work/failed.out" | grep -o "[0-9]*)$" | tr -d ')')
if [ $((step % steps)) -ne 0 ]; then
  epoch=$((step / steps + 1))
  [ "$(grep -c "epoch $epoch/2: resumed after batch $((step % steps))/$steps" "$work/failed.out")" -eq 1 ] ||
    fail "the resumed epoch $epoch did not say once that it resumed after batch $((step % steps))"
  sed -n '/resumed after batch/,$p' "$work/failed.out" | grep -q "epoch $epoch/2 batch $steps/$steps (100%)" ||
    fail "the resumed epoch's progress did not end at $steps/$steps (100%)"
  grep -q "epoch $epoch/2: .* after resuming at batch $((step % steps)) of $steps, test accuracy" "$work/failed.out" ||
    fail "the resumed epoch's summary does not say where it resumed"
fi
acc_a=$(grep -o "final test accuracy [0-9.]*" "$work/plain.out")
acc_b=$(grep -o "final test accuracy [0-9.]*" "$work/failed.out")
[ -n "$acc_a" ] && [ "$acc_a" = "$acc_b" ] || fail "'$acc_a' != '$acc_b'"
res_a=$(grep -o '"accuracy": [0-9.]*' "$work/plain.out")
res_b=$(grep -o '"accuracy": [0-9.]*' "$work/failed.out")
[ "$res_a" = "$res_b" ] || fail "nano-result accuracy '$res_a' != '$res_b'"
echo "PASS: $acc_b after a SIGKILL and a resume, as without"
