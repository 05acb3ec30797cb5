#!/bin/bash
# What a one-host job listens on: a training of 2 ranks (tests/faults' fault_rank) under
# nano-run, on each backend and communicator, once it has trained and checkpointed. Every listening socket of the job's processes (nano-run, its
# guardian, mpirun, the shims, the ranks) must be on loopback, except mpirun's own (Open MPI
# 4.1's orte and 5's prte bind their daemon channel, and 5 its PMIx server, to every address,
# with no setting to narrow it): those are printed as a known exception, for mpirun alone, and
# only when mpirun runs with nano's listen guard (admitting this host's own addresses only).
# Without --backend (a newcomer's first run) nothing listens off loopback at all: no mpirun.
#   listeners.sh NANO_RUN FAULT_RANK
set -u
nano_run=$1
program=$2
fail() { echo "FAIL: $*"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

descendants() {  # the pid and every process below it
  local all
  all=$(ps -e -o pid=,ppid=)
  local list=" $1 " grew=1
  while [ $grew -eq 1 ]; do
    grew=0
    while read -r pid ppid; do
      if [[ $list == *" $ppid "* && $list != *" $pid "* ]]; then list+="$pid "; grew=1; fi
    done <<< "$all"
  done
  echo $list
}

check() {  # check BACKEND|default [ENV...]
  local backend=$1
  shift
  local asked=(--backend "$backend")
  [ "$backend" = default ] && asked=()
  local out
  out=$(mktemp)
  local ckpt
  ckpt=$(mktemp -d)
  env "$@" "$nano_run" -n 2 "${asked[@]}" "$program" --steps 1000000 --checkpoint-dir "$ckpt" \
    --checkpoint-every 5 > "$out" 2>&1 &
  local job=$!
  for _ in $(seq 1 600); do  # training has begun: every listener of the start is up
    compgen -G "$ckpt/ckpt-*.nano" > /dev/null && break
    kill -0 $job 2>/dev/null || { cat "$out"; rm -f "$out"; fail "$backend: the job ended early"; }
    sleep 0.05
  done
  local pids bad="" known="" line addr pid name
  pids=" $(descendants $job) "
  local commands
  commands=$(ps -o comm= -p "$(tr -s ' ' ',' <<< "${pids# }" | sed 's/,$//')" 2>/dev/null)
  while read -r line; do
    addr=$(awk '{print $4}' <<< "$line")
    pid=$(grep -o 'pid=[0-9]*' <<< "$line" | head -1 | cut -d= -f2)
    name=$(grep -o '(("[^"]*"' <<< "$line" | head -1 | cut -d'"' -f2)
    [[ $pids == *" $pid "* ]] || continue
    case "$addr" in
      127.*:* | "[::1]":*) ;;
      *)
        if [ "$name" = mpirun ] || [ "$name" = prterun ]; then
          # Guarded: its listen guard admits this host's own addresses only (multihost.strangers
          # attacks it from another host).
          if tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -q '^NANO_LISTEN_GUARD=127\.0\.0\.1'; then
            known+=" $name@$addr"
          else
            bad+=" $name@$addr(unguarded)"
          fi
        else
          bad+=" $name@$addr"
        fi
        ;;
    esac
  done < <(ss -ltnpH; ss -lunpH)
  kill -INT $job
  wait $job
  rm -rf "$out" "$ckpt"
  echo "$backend ${*:-}: off loopback:${bad:- none}; known (mpirun's own, guarded):${known:- none}"
  [ -z "$bad" ] || fail "$backend ${*:-}: listening off loopback:$bad"
  if [ "$backend" = default ] && [ -n "$known" ]; then fail "the default backend on one host started mpirun:$known"; fi
  if [ "$backend" = default ] && grep -qE 'mpirun|prterun|orted|prted' <<< "$commands"; then
    fail "the default backend on one host runs Open MPI: $(tr '\n' ' ' <<< "$commands")"
  fi
}

check default
check subprocess
check subprocess NANO_BACKEND=gloo
check mpi
check mpi NANO_BACKEND=gloo
echo "PASS: a one-host job listens on loopback only"
