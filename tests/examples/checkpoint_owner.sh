#!/bin/bash
# One live owner per checkpoint folder, end to end on real data (fashion_mnist_nano):
#   1. a second job started on the folder of a running one is refused in one line naming the
#      owner (host, pid, since), exit 2, and starts nothing;
#   2. after the owner is SIGKILLed (its guardian removes its result file), the next job takes
#      the stale claim over in one line, resumes from the last checkpoint and leaves no claim;
#   3. a folder whose checkpoints are all damaged says in one line that training starts at 0.
#   checkpoint_owner.sh PROGRAM
set -u
program=$1
work=$(mktemp -d /tmp/nano-ckpt-owner-XXXXXX)
dir=$work/ckpt
a=""
cleanup() {
  [ -n "$a" ] && kill -KILL "$a" 2>/dev/null
  [ -n "${watchdog:-}" ] && kill "$watchdog" 2>/dev/null
  pkill -KILL -f -- "--checkpoint-dir $dir" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
args=(--num-processes 2 --epochs 1 --batch-size 32 --test-limit 500 --equal-batches --checkpoint-every 10
      --checkpoint-dir "$dir")
wait_for() {  # wait_for SECONDS COMMAND...: polls every 50 ms
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}
no_process_left() { ! pgrep -f -- "--checkpoint-dir $dir" > /dev/null; }
no_result_file() { ! compgen -G "$work/nano-in-program-*" > /dev/null; }
claimed() { compgen -G "$dir/.nano-owner.[0-9]*" > /dev/null; }

# 1. A runs; B comes while it does. A's in-program launch makes its result file in $TMPDIR.
TMPDIR=$work "$program" "${args[@]}" --max-steps-per-epoch 400 > "$work/a.out" 2>&1 &
a=$!  # the program itself (its pid is the claim's); bounded by the watchdog below
(sleep 300; kill -KILL "$a" 2>/dev/null) > /dev/null 2>&1 &
watchdog=$!
wait_for 120 claimed || { cat "$work/a.out"; fail "job A made no claim"; }
timeout 60 "$program" "${args[@]}" --max-steps-per-epoch 400 > "$work/b.out" 2>&1
rc=$?
cat "$work/b.out"
[ $rc -eq 2 ] || fail "job B exited with $rc, not 2"
[ "$(wc -l < "$work/b.out")" -eq 1 ] || fail "job B said more than one line"
grep -Eq "^[a-z_]+: error: nano: checkpoint folder $dir is in use by job [^ ]+ \(host $(hostname), pid $a, since [0-9-]+ [0-9:]+ UTC\): stop that job or use another folder$" \
  "$work/b.out" || fail "job B's line does not name job A (pid $a)"
kill -0 "$a" 2>/dev/null || { cat "$work/a.out"; fail "job A did not survive job B's attempt"; }

# 2. A is SIGKILLed after a checkpoint; C takes over and resumes.
wait_for 200 compgen -G "$dir/ckpt-*.nano" > /dev/null || { cat "$work/a.out"; fail "job A wrote no checkpoint"; }
kill -KILL "$a"
wait "$a" 2>/dev/null
a=""
wait_for 30 no_process_left || fail "job A's ranks outlived it"
wait_for 10 no_result_file || fail "job A's result file outlived it: $(echo "$work"/nano-in-program-*)"
claimed || fail "the SIGKILLed owner's claim vanished (nothing to take over)"
timeout 300 "$program" "${args[@]}" --max-steps-per-epoch 60 > "$work/c.out" 2>&1
rc=$?
cat "$work/c.out"
[ $rc -eq 0 ] || fail "job C exited with $rc"
grep -Eq "^nano: checkpoint folder $dir: taking over the claim of job [^ ]+ \(host $(hostname), pid [0-9]+, since [^)]*\), which is gone$" \
  "$work/c.out" || fail "job C did not say it took the stale claim over"
[ "$(grep -c 'taking over the claim' "$work/c.out")" -eq 1 ] || fail "the take-over was said more than once"
grep -q "nano: resuming from checkpoint $dir/ckpt-" "$work/c.out" || fail "job C did not resume"
claimed && fail "job C left its claim behind"
ls -a "$dir" | grep -q '^\.nano-owner-tmp' && fail "a claim's temporary file was left behind"

# 3. Only damaged checkpoints: the ones there cut short, and two of higher steps than any run here
#    reaches (garbage; a header cut short: a copy cut short, an older job's files). The run says
#    so (each named, and that training starts from step 0), keeps its own newest verified
#    checkpoint (--checkpoint-keep 1) and never deletes nor counts a damaged one; the next run
#    resumes from that checkpoint, the damaged ones still beside it.
for f in "$dir"/ckpt-*.nano; do truncate -s 100 "$f"; done
head -c 3000 /dev/urandom > "$dir/ckpt-000000090000.nano"
printf 'nano-checkpoint 1\nstep 90001\nwor' > "$dir/ckpt-000000090001.nano"
damaged=$(cd "$dir" && for f in ckpt-*.nano; do echo "$f $(stat -c %s "$f")"; done)
n=$(wc -l <<< "$damaged")
timeout 300 "$program" "${args[@]}" --max-steps-per-epoch 25 --checkpoint-keep 1 > "$work/d.out" 2>&1
rc=$?
cat "$work/d.out"
[ $rc -eq 0 ] || fail "job D exited with $rc"
grep -qF "nano: no usable checkpoint in $dir ($n not whole or not ours, skipped): training starts from step 0" "$work/d.out" ||
  fail "job D did not say that it starts from step 0"
grep -qE "^(\[rank 0\] )?nano: $n entries of checkpoint folder $dir never loaded, counted as kept or deleted: ckpt-000000090001.nano \(not a nano checkpoint\), ckpt-000000090000.nano \(not a nano checkpoint\), " \
  "$work/d.out" || fail "job D did not name the damaged checkpoints in one line"
[ -e "$dir/ckpt-000000000020.nano" ] && [ ! -e "$dir/ckpt-000000000010.nano" ] ||
  fail "job D did not keep its newest checkpoint alone: $(cd "$dir" && echo ckpt-*)"
timeout 300 "$program" "${args[@]}" --max-steps-per-epoch 25 --checkpoint-keep 1 > "$work/e.out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$work/e.out"; fail "job E exited with $rc"; }
grep -q "nano: resuming from checkpoint $dir/ckpt-000000000020.nano" "$work/e.out" ||
  { cat "$work/e.out"; fail "job E did not resume from job D's checkpoint"; }
[ "$(cd "$dir" && for f in $(cut -d' ' -f1 <<< "$damaged"); do echo "$f $(stat -c %s "$f" 2>/dev/null)"; done)" = "$damaged" ] ||
  fail "a damaged checkpoint was deleted or changed"
echo "PASS: one owner per checkpoint folder (refused, taken over when stale, released at the end)"
