#!/usr/bin/env bash
# The fuzzers of tests/fuzz/ for longer than CI's 20 s each (ctest -R fuzz runs those), one after
# another, each on its corpus in the tree (tests/fuzz/corpus/NAME). A crash prints FAIL with the
# reproducer's path: make it a table test beside the parser's others and fix it. Targets: those
# tests/fuzz/CMakeLists.txt names (frames store_wire hostfile timeline; all by default).
# Usage: scripts/fuzz.sh [--grow] [--seeds] [--minimise] [SECONDS] [TARGET...]
#   SECONDS     how long each fuzzer runs (default 300; 0 runs none, for --seeds and --minimise alone)
#   --grow      adds what the runs found that reaches new code to the corpus in the tree
#   --seeds     first writes each target's seeds (nano_fuzz_seeds() in NAME_fuzz.cc) into its corpus
#   --minimise  last rewrites each corpus as the fewest, smallest inputs that reach the code it
#               reaches (-merge=1 on edges, not on how often each is taken: a tenth of the bytes)
#   NANO_FUZZ_BUILD_DIR  where the fuzzers are built (default build-fuzz); NANO_FUZZ_CXX as in
#   tests/fuzz/build.sh
set -euo pipefail
cd "$(dirname "$0")/.."
grow=0 seeds=0 minimise=0 seconds=300 targets=()
for arg in "$@"; do
  case "$arg" in
    --grow) grow=1 ;;
    --seeds) seeds=1 ;;
    --minimise) minimise=1 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $arg" >&2; exit 2 ;;
    *[!0-9]*) targets+=("$arg") ;;
    *) seconds=$arg ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <(sed -n 's/^nano_fuzz_target(\([a-z_0-9]*\) .*/\1/p' tests/fuzz/CMakeLists.txt)
fi
build=${NANO_FUZZ_BUILD_DIR:-build-fuzz}
tests/fuzz/build.sh . "$build"
failed=0
for name in "${targets[@]}"; do
  corpus=tests/fuzz/corpus/$name
  fuzzer=$build/bin/${name}_fuzz
  if [ ! -x "$fuzzer" ]; then
    echo "fuzz.sh: no target $name (tests/fuzz/CMakeLists.txt names them)" >&2
    exit 2
  fi
  mkdir -p "$corpus"
  if [ "$seeds" = 1 ]; then
    cmake --build "$build" --target "${name}_seeds" >/dev/null
    "$build/bin/${name}_seeds" "$corpus"
  fi
  if [ "$seconds" -gt 0 ]; then
    if ! NANO_FUZZ_SECONDS=$seconds tests/fuzz/run.sh "$name" "$build" "$corpus"; then
      failed=1
      continue
    fi
    if [ "$grow" = 1 ]; then
      before=$(ls "$corpus" | wc -l)
      "$fuzzer" -merge=1 -use_counters=0 "$corpus" "$build/scratch/$name" >"$build/logs/$name.merge.log" 2>&1
      echo "fuzz.sh: $name: $(($(ls "$corpus" | wc -l) - before)) new inputs in $corpus"
    fi
  fi
  if [ "$minimise" = 1 ]; then
    fresh=$build/minimised/$name
    rm -rf "$fresh"
    mkdir -p "$fresh"
    "$fuzzer" -merge=1 -use_counters=0 "$fresh" "$corpus" >"$build/logs/$name.minimise.log" 2>&1
    rm -f "$corpus"/*
    cp "$fresh"/* "$corpus"/
    echo "fuzz.sh: $name: corpus minimised to $(ls "$corpus" | wc -l) inputs, $(du -sk "$corpus" | cut -f1) KB"
  fi
done
exit "$failed"
