#!/usr/bin/env bash
# The README's test command: install dependencies, configure, build, run every test, then say
# which were slowest and how the leg stands against its budget (scripts/test-summary.sh).
# Extra arguments go to ctest: scripts/test.sh -L quick (the quick subset), -R cli, ...
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
  # Building nano-init alone in an empty folder checks the same CMake code on both legs: here
  # only its build plans.
  export NANO_TARGETS_ALONE=plans
fi
# MPI tests run as root on CI machines.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# As many tests at a time as the build's jobs, plus one multi-host case: those mostly wait (on
# their namespace hosts, on timeouts, on each other through their lock), and run one at a time
# in one slot they left a core idle for most of the suite. Every other test takes one of the
# "cores" of the resource spec below (tests/CMakeLists.txt: nano_tests_take_a_core). (Running
# one test more of any kind, 3 on 2 cores, put the heaviest three at a time and time-bounded
# ones failed: a 4 s rendezvous, the soak's 3 s collective timeout.)
spec=$(cd "$build" && pwd)/ctest-resources.json  # absolute: ctest --test-dir changes folder first
printf '{"version": {"major": 1, "minor": 0}, "local": [{"cores": [{"id": "0", "slots": %d}]}]}\n' "$jobs" > "$spec"
log=$(mktemp "${TMPDIR:-/tmp}/nano-test-XXXXXX")
trap 'rm -f "$log"' EXIT
SECONDS=0
status=0
# NANO_TEST_LEG_ARGS: what a leg leaves out (scripts/test-debian13.sh: "-LE one-leg"), apart
# from a caller's own selection.
# shellcheck disable=SC2086
ctest --test-dir "$build" --output-on-failure -j "$((jobs + 1))" --resource-spec-file "$spec" --timeout 600 \
  ${NANO_TEST_LEG_ARGS:-} "$@" 2>&1 |
  tee "$log" || status=$?  # pipefail: ctest's own exit status
# The leg's budget (docs/developing.md, "The test budget"): the tests' wall time on the 2-core
# machine, whole runs only. Over it is a finding for the next change, not a failure: timings
# move with the machine's load.
budget=${NANO_TEST_BUDGET_S:-$( [ "$( . /etc/os-release && echo "${VERSION_CODENAME:-}")" = bookworm ] && echo 1150 || echo 950)}
scripts/test-summary.sh "$log" "$SECONDS" "$budget" "$#"
exit "$status"
