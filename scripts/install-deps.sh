#!/usr/bin/env bash
# Installs everything nano needs from Debian 12 packages. Quick no-op when all are present.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libtorch-dev libgloo-dev libcli11-dev libhwloc-dev hwloc nlohmann-json3-dev
  libopenmpi-dev openmpi-bin doctest-dev libjemalloc2 libgoogle-perftools4
  python3-torch dataset-fashion-mnist zlib1g-dev gnuplot-nox
  # An optimised BLAS for the Linear layers of libtorch and python3-torch (Debian's default
  # alternative is the single-threaded reference BLAS); the OpenMP build follows OMP_NUM_THREADS.
  libopenblas0-openmp
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
