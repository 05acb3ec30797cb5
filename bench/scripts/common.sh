# shellcheck shell=bash
# Sourced by every benchmark body in bench/scripts/ (they are run as `scripts/bench.sh NAME`):
# the settings they share. After sourcing, the working directory is the repository root.
#   bench_start NAME "$@"   --help/-h prints the body's header comment and exits 0; else sets
#                           Open MPI's root settings
#   bench_build_dir [DIR]   the build folder: DIR, else $NANO_BUILD_DIR, else build
#   bench_cores BUILD_DIR   physical cores as nano sees them (nano-init --show-topology --json:
#                           hwloc, allowed CPUs only), hwloc-calc as a fallback
#   gloo_pair [VAR=VALUE...] -- PROGRAM [ARGS...]   2 ranks with torchrun's environment on
#                           127.0.0.1 (below)
nano_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$nano_root" || exit 2
# shellcheck disable=SC2034  # used by the bodies
python=/usr/bin/python3   # Debian's, with python3-torch (a pyenv python3 on PATH may lack torch)

bench_start() {
  local body="$nano_root/bench/scripts/$1.sh"
  shift
  if [[ ${1:-} == -h || ${1:-} == --help ]]; then
    # The header comment, up to the first line that is not a comment.
    sed -n '2,${/^#/!q;s/^# \{0,1\}//;p}' "$body"
    exit 0
  fi
  # mpirun refuses to run as root without these (CI machines and containers run as root).
  if [[ $(id -u) == 0 ]]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
}

bench_build_dir() { echo "${1:-${NANO_BUILD_DIR:-build}}"; }

bench_cores() {
  local cores
  cores=$("$1/bin/nano-init" --show-topology --json 2>/dev/null |
          python3 -c 'import json, sys; print(json.load(sys.stdin)["cores"])' 2>/dev/null) || true
  [[ $cores =~ ^[0-9]+$ ]] || cores=$(hwloc-calc --number-of core all)
  echo "$cores"
}

# gloo_pair [VAR=VALUE...] -- PROGRAM [ARGS...] runs PROGRAM as 2 ranks with torchrun's
# environment contract on 127.0.0.1 (a free port), rank r pinned to CPU r, the VAR=VALUE settings
# added to both, and prints both ranks' output once they end (through a file, so their lines
# never interleave mid-line).
gloo_pair() {
  local settings=() port log r
  while [[ $1 != -- ]]; do settings+=("$1"); shift; done
  shift
  port=$(python3 "$nano_root/tests/common/free_port.py")
  log=$(mktemp)
  for r in 0 1; do
    env "${settings[@]}" RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT="$port" taskset -c "$r" "$@" >>"$log" &
  done
  wait
  cat "$log"
  rm -f "$log"
}
