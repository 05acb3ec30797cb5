# Sourced by the bench scripts. gloo_pair [VAR=VALUE...] -- PROGRAM [ARGS...] runs PROGRAM as
# 2 ranks with torchrun's environment contract on 127.0.0.1 (a free port), rank r pinned to
# CPU r, the VAR=VALUE settings added to both, and prints both ranks' output once they end
# (through a file, so their lines never interleave mid-line).
gloo_pair() {
  local settings=() port log r
  while [[ $1 != -- ]]; do settings+=("$1"); shift; done
  shift
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  log=$(mktemp)
  for r in 0 1; do
    env "${settings[@]}" RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
      MASTER_PORT="$port" taskset -c "$r" "$@" >>"$log" &
  done
  wait
  cat "$log"
  rm -f "$log"
}
