#!/usr/bin/env bash
# Installs everything nano needs from Debian packages (Debian 12 "bookworm" or 13 "trixie").
# Quick no-op when all are present.
set -euo pipefail

# Debian 13 renamed libraries for the 64-bit time_t transition; the old name is only a
# virtual package there, which dpkg-query never reports as installed.
codename=$( . /etc/os-release && echo "${VERSION_CODENAME:-}")
perftools=libgoogle-perftools4t64
if [ "$codename" = bookworm ]; then perftools=libgoogle-perftools4; fi

packages=(
  build-essential cmake ninja-build pkg-config
  # A compiler cache: a second build of the same sources (CI's next run, another clone, the
  # other build folder) takes its objects from it (CMakeLists.txt, NANO_CCACHE).
  ccache
  libtorch-dev libgloo-dev libcli11-dev libhwloc-dev hwloc nlohmann-json3-dev
  libopenmpi-dev openmpi-bin doctest-dev libjemalloc2 "$perftools"
  python3-torch dataset-fashion-mnist zlib1g-dev gnuplot-nox
  # Hashes and MACs (the job secret's challenges, sealed checkpoints): OpenSSL's libcrypto.
  libssl-dev
  # The `nano` backend of torch.distributed (python): a pybind11 extension built
  # against python3-torch, with the same pybind11 that Debian built torch with.
  pybind11-dev python3-dev
  # The Python API (nano_torch.TorchNano, @nano): the training shipped by value to the ranks; the
  # examples' progress bars, models and notebook, and the notebook's test (a real Jupyter kernel).
  python3-cloudpickle python3-tqdm python3-torchvision jupyter-nbconvert python3-ipykernel python3-venv
  # BigDL-Nano's own tests, run as BigDL-Nano ran them (tests/python/bigdl).
  python3-pytest
  # An optimised BLAS for the Linear layers of libtorch and python3-torch (Debian's default
  # alternative is the single-threaded reference BLAS); the OpenMP build follows OMP_NUM_THREADS.
  libopenblas0-openmp
  # The multi-host test bed (tests/multihost): namespaces, its hosts' links, a real Slurm.
  iproute2 util-linux bc slurmd slurmctld slurm-client munge
)

# scripts/lint.sh's formatter and linter, pinned to Debian 12's LLVM 14 (another version
# formats differently); the Debian 13 leg does not lint. The fuzzers (tests/fuzz) are built with
# Debian's clang and its libFuzzer runtime (clang does not pull that in itself).
if [ "$codename" = bookworm ]; then
  packages+=(clang-format-14 clang-tidy-14 clang-14 libclang-rt-14-dev)
else
  packages+=(clang libclang-rt-dev)
fi

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
