# shellcheck shell=bash disable=SC2034,SC2120,SC2154  # the variables are multihost_test.sh's
# Sourced by multihost_test.sh: how its cases run nano-run on the test bed and check what a job
# leaves behind. They use the script's testbed, state, out, nano_run, fault_rank and fail, and
# set rc (and job, started, took for a training in the background).
#   on_a CMD...                      CMD on hostA
#   leftovers HOST                   the job's processes on HOST
#   files_left HOST                  the job's files on HOST
#   check_nothing_left [LOST_HOST]   fail on any process or file of the job left on any host
#   run_a CMD...                     CMD on hostA, bounded: output in $out, exit code in $rc
#   start_training OPTIONS...        a long training on hostA and hostB in the background
#   end_training                     waits for it: $rc, $took
#   signal_launcher SIGNAL EXIT GRACE   nano-run of a training gets SIGNAL, must exit with EXIT
#   expect_line REGEX                fail unless a line of $out matches REGEX

on_a() { bash "$testbed" run "$state" hostA "$@"; }

# Every process of the job on HOST (the test bed's holder and its Slurm daemons excluded).
leftovers() {
  local holder line
  holder=$(cat "$state/$1.pid" 2>/dev/null)  # none once the host was killed
  for p in $(bash "$testbed" pids "$state" "$1"); do
    [ "$p" = "$holder" ] && continue
    line="$p $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | cut -c1-80)"
    grep -qE "^$p (munged|slurmctld|slurmd|: slurmscriptd)" <<< "$line" && continue
    echo "$line"
  done
}

# Files of the job on HOST: anything in its private /dev/shm (but the test bed's Slurm daemons'),
# and Open MPI's session folders and nano's job folders in /tmp (shared by the test bed's hosts)
# made since this case began.
files_left() {
  bash "$testbed" run "$state" "$1" sh -c 'ls -A /dev/shm | grep -v "^slurmd" | sed "s|^|/dev/shm/|"'
  find /tmp -maxdepth 1 -newer "$state/hosts" \( -name 'ompi.*' -o -name 'nano-[0-9]*-[0-9a-f]*' \) 2>/dev/null
}

# check_nothing_left [LOST_HOST]: no process on any host, no file on any host but LOST_HOST,
# whose every process was killed: nothing of it is left to clean its private /dev/shm, which a
# real lost host loses with its memory. What it holds is printed.
check_nothing_left() {
  local h left
  for h in $(cat "$state/hosts"); do
    for _ in $(seq 1 50); do  # processes that were killed may take a moment to be reaped
      left=$(leftovers "$h")
      [ -z "$left" ] && break
      sleep 0.1
    done
    [ -z "$left" ] || fail "left on $h after nano-run ended: $left"
    if [ "$h" = "${1:-}" ]; then
      echo "on the lost $h (its processes all killed): $(files_left "$h" 2>/dev/null | grep -c /dev/shm/) entries in its /dev/shm"
      continue
    fi
    for _ in $(seq 1 50); do  # a cut-off host's shim cleans up once it has ended its rank
      left=$(files_left "$h" | sort -u | tr '\n' ' ')
      [ -z "$left" ] && break
      sleep 0.1
    done
    [ -z "$left" ] || fail "files left on $h after nano-run ended: $left"
  done
}

# Runs nano-run on hostA with ARGS (bounded); output in $out, exit code in $rc.
run_a() {
  timeout 120 bash "$testbed" run "$state" hostA "$@" > "$out" 2>&1
  rc=$?
}

# A long training on hostA and hostB in the background ($job), with nano-run OPTIONS; returns
# once it trains. end_training waits for it: $rc, and $took seconds since it trained.
start_training() {
  timeout 120 bash "$testbed" run "$state" hostA "$nano_run" ${layout:--n 2 --hosts hostA:1,hostB:1} "$@" \
    "$fault_rank" --steps 100000 > "$out" 2>&1 &
  job=$!
  for _ in $(seq 1 200); do grep -q "mpi communicator" "$out" && break; sleep 0.05; done
  sleep 1
  started=$(date +%s.%N)
}
end_training() {
  wait $job
  rc=$?
  took=$(echo "$(date +%s.%N) - $started" | bc)
}

# signal_launcher SIGNAL EXIT GRACE: a training on hostA and hostB whose nano-run gets SIGNAL;
# it must exit with EXIT and leave nothing on any host.
signal_launcher() {
  start_training --grace-period "$3"
  kill -"$1" "$(pgrep -P "$job")"  # timeout's child: nano-run (bash and nsenter exec into it)
  end_training
  [ $rc -eq "$2" ] || fail "exit $rc, expected $2 after SIG$1: $(tail -5 "$out")"
  check_nothing_left
}

expect_line() {
  grep -qE "$1" "$out" || fail "no line matching '$1' in: $(tail -5 "$out")"
}
