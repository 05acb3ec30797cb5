#!/usr/bin/env bash
# The README's test command: install dependencies, configure, build, run every test.
# NANO_BUILD_ONLY=1 stops after the build (and lint): .ci/run builds the Debian 13 leg that way
# beside the Debian 12 leg's tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
build=${NANO_BUILD_DIR:-build}
jobs=${NANO_JOBS:-$(nproc)}
# Explicit options: a build folder first configured by demo.sh has the tests switched off.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DNANO_BUILD_TESTS=ON -DNANO_BUILD_RUNTIME=ON -DNANO_BUILD_EXAMPLES=ON
cmake --build "$build" -j "$jobs"
# Formatting and clang-tidy (pinned to Debian 12's LLVM 14: another version formats
# differently, so the Debian 13 leg leaves it to the Debian 12 one).
if [ "$( . /etc/os-release && echo "${VERSION_CODENAME:-}")" = bookworm ]; then
  scripts/lint.sh "$build"
else
  echo "test.sh: lint left to the Debian 12 leg (clang-format 14)"
fi
if [ "${NANO_BUILD_ONLY:-}" = 1 ]; then
  echo "test.sh: built in $build (NANO_BUILD_ONLY=1: no tests run)"
  exit 0
fi
# MPI tests run as root on CI machines.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# As many tests at a time as the build's jobs. (One more, 3 on 2 cores, keeps both cores 95%
# busy and saves 2-3 minutes a leg, but the heaviest tests then overlap three at a time and
# time-bounded ones fail: a 4 s rendezvous, the soak's 3 s collective timeout.)
ctest --test-dir "$build" --output-on-failure -j "$jobs" --timeout 600 "$@"
