#!/usr/bin/env bash
# A chaos soak: fashion_mnist_nano under --max-restarts with faults at random moments from a
# seeded schedule (bench/python/soak.py says which and what it checks).
#   scripts/soak.sh [BUILD_DIR] [--hosts] [--faults N | --minutes M] [--seed S] [--steps N]
#                   [--epochs E] [--kinds K,K,...]
# On this host, as root, it runs in a private mount namespace, where the checkpoint folder is a
# small tmpfs that the soak fills up for a while; elsewhere (or where that namespace cannot be
# made, as in a chroot) it leaves out the full-disk faults. --hosts (root): on two hosts of the
# multi-host test bed under nano-run, with a cut link and a lost host among the faults.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then build=$1; shift; fi
program=$build/bin/fashion_mnist_nano
[ -x "$program" ] || { echo "soak: no $program (build first: scripts/test.sh or cmake --build $build)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
args=()
hosts=0
for a in "$@"; do
  if [ "$a" = --hosts ]; then
    hosts=1
    args+=(--hosts "$(cd "$build" && pwd)/bin/nano-run")
  else
    args+=("$a")
  fi
done
set -- "${args[@]}"
if [ $hosts = 1 ]; then exec python3 bench/python/soak.py "$(cd "$(dirname "$program")" && pwd)/$(basename "$program")" "$@"; fi
if [ "$(id -u)" = 0 ] && unshare -m --propagation private -- mount -t tmpfs nano-soak-probe /mnt 2>/dev/null; then
  exec unshare -m --propagation private -- env NANO_SOAK_PRIVATE_MOUNTS=1 python3 bench/python/soak.py "$program" "$@"
fi
exec python3 bench/python/soak.py "$program" "$@"
