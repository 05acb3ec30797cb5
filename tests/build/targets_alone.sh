#!/usr/bin/env bash
# Each program's target, built alone in an empty build folder, brings what the program needs at
# run time (the listen guard, the rank shim, the nano_torch package): a newcomer who builds only
# `nano-run` (as scripts/demo.sh does) gets a nano-run that runs.
#   - nano-init is built alone in an empty folder without the torch runtime and run; building
#     it built nothing of nano-run's (nano-init needs none of launcher/);
#   - in that folder, a dry run of ninja shows that building nano-run alone builds the guard;
#   - with the runtime, a dry run of ninja in an empty configured folder shows that building
#     nano-run alone builds the guard and the nano_torch package, and that a program with an
#     in-program launch builds nano-run (scripts/demo.sh builds and runs those for real in CI).
# NANO_TARGETS_ALONE=full also builds nano-run alone and runs it on both backends (the mpi one
# preloads the listen guard into mpirun and runs nano-run as every rank's shim): 2-3 minutes of
# both cores, which CI leaves out, as the plan says the same; NANO_TARGETS_ALONE=plans (the
# Debian 13 leg, whose build graph is the same CMake code) only the dry runs.
# Usage: targets_alone.sh SOURCE_DIR [with-runtime]   Prints "PASS: ..." or "FAIL: why" (exit 1).
set -uo pipefail
source_dir=$1
# In ctest's folder of this test (inside the build folder): where the build folder lies inside the
# source folder, ccache (CMakeLists.txt) finds this run's objects again in the next one.
work=$(mktemp -d "$PWD/targets-alone-XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# build TARGET: build TARGET alone in $work/light.
build() {
  timeout 900 cmake --build "$work/light" -j "$(nproc)" --target "$1" > "$work/$1.build" 2>&1 ||
    { tail -30 "$work/$1.build"; fail "building $1 alone"; }
}

# Without the runtime, unoptimised and without debug information (build type None): this checks
# what is built, not how fast it runs.
cmake -S "$source_dir" -B "$work/light" -G Ninja -DNANO_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=None \
  -DNANO_BUILD_RUNTIME=OFF -DNANO_BUILD_EXAMPLES=OFF > "$work/light.configure" 2>&1 ||
  { cat "$work/light.configure"; fail "configuring an empty folder"; }

if [ "${NANO_TARGETS_ALONE:-}" != plans ]; then
build nano-init
out=$(timeout 60 "$work/light/bin/nano-init" --show-topology 2>&1) || fail "nano-init built alone: $out"
grep -q "usable physical core" <<<"$out" || fail "nano-init --show-topology said: $out"
[ ! -e "$work/light/lib/nano/libnano_listen_guard.so" ] && [ ! -e "$work/light/bin/nano-run" ] ||
  fail "building nano-init built nano-run's parts: this test would not see what nano-run's target builds"

light_plan=$(ninja -C "$work/light" -n nano-run 2>&1)
grep -q "libnano_listen_guard.so" <<<"$light_plan" || fail "building nano-run alone (no runtime) would not build the listen guard"
fi

if [ "${NANO_TARGETS_ALONE:-}" = full ]; then
build nano-run
[ -f "$work/light/lib/nano/libnano_listen_guard.so" ] || fail "building nano-run did not build the listen guard"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
for backend in subprocess mpi; do
  out=$(timeout 120 "$work/light/bin/nano-run" -n 2 --backend "$backend" /bin/sh -c 'echo "rank $RANK of $WORLD_SIZE"' 2>&1)
  code=$?
  [ $code -eq 0 ] || fail "nano-run --backend $backend built alone exited $code: $out"
  for r in 0 1; do
    grep -q "rank $r of 2" <<<"$out" || fail "nano-run --backend $backend: no line from rank $r: $out"
  done
done
fi

# With the runtime (when this build has it): what building each target alone would build.
if [ "${2:-}" = with-runtime ]; then
  cmake -S "$source_dir" -B "$work/full" -G Ninja -DNANO_BUILD_TESTS=OFF > "$work/full.configure" 2>&1 ||
    { cat "$work/full.configure"; fail "configuring with the runtime"; }
  plan() { ninja -C "$work/full" -n "$1" 2>&1; }
  nano_run_plan=$(plan nano-run)
  grep -q "libnano_listen_guard.so" <<<"$nano_run_plan" || fail "building nano-run alone would not build the listen guard"
  if grep -q "nano: torch backend for" "$work/full.configure"; then
    grep -q "nano_torch/_C" <<<"$nano_run_plan" || fail "building nano-run alone would not build the nano_torch package"
    grep -q "nano_torch/__init__.py" <<<"$nano_run_plan" || fail "building nano-run alone would not copy nano_torch's Python half"
  fi
  for program in fashion_mnist_nano fashion_mnist_decorator resnet18_cifar; do
    # Captured before grep: `plan | grep -q` under pipefail fails when grep stops reading early
    # and ninja dies of SIGPIPE.
    program_plan=$(plan "$program")
    grep -q "Linking CXX executable bin/nano-run" <<<"$program_plan" ||
      fail "building $program alone would not build nano-run, its in-program launch's rank shim"
  done
fi
case "${NANO_TARGETS_ALONE:-}" in
  plans) echo "PASS: (build plans only) nano-run's target brings the guard and the nano_torch package" ;;
  full) echo "PASS: nano-run and nano-init built alone run; nano-run's target brings the guard and the nano_torch package" ;;
  *) echo "PASS: nano-init built alone runs; nano-run's target brings the guard and the nano_torch package" ;;
esac
