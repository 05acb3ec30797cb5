#!/usr/bin/env bash
# The Debian 13 ("trixie": libtorch 2.6, Open MPI 5, GCC 14) leg of the tests: scripts/test.sh
# inside the Debian 13 root that scripts/debian13-root.sh keeps, with build folder
# build-debian13: the whole build, and every test but those labelled one-leg (tests/budget.cmake
# says which and why). CI's second leg. Needs root.
# Usage: scripts/test-debian13.sh [ctest args...]   (NANO_TEST_ALL_LEGS=1: the one-leg tests too)
set -euo pipefail
cd "$(dirname "$0")/.."
leg="-LE one-leg"
[ "${NANO_TEST_ALL_LEGS:-0}" = 1 ] && leg=""
# The fuzzers run 10 s each here (20 on Debian 12): the same code, another clang and its sanitizers.
exec scripts/debian13-root.sh env NANO_BUILD_DIR=build-debian13 NANO_JOBS="${NANO_JOBS:-}" NANO_TEST_LEG_ARGS="$leg" \
  NANO_FUZZ_SECONDS="${NANO_FUZZ_SECONDS:-10}" scripts/test.sh "$@"
