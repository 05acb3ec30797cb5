#!/usr/bin/env bash
# Runs one fuzzer (built by build.sh) on its corpus for a bounded time: ctest's fuzz.<name> and
# scripts/fuzz.sh. The corpus in the tree is only read; what the fuzzer finds new goes to a
# scratch folder, BUILD_DIR/scratch/NAME, emptied first. Prints one line:
#   PASS: fuzz.NAME: N executions, 0 crashes
#   FAIL: fuzz.NAME: ... (the reproducer's path; run BUILD_DIR/bin/NAME_fuzz on it to see it again)
#   SKIP: fuzz.NAME: ... (exit 77: no clang++ with libFuzzer, so nothing was built)
# Usage: tests/fuzz/run.sh NAME BUILD_DIR CORPUS_DIR
#   NANO_FUZZ_SECONDS  how long it fuzzes (default 20)
#   NANO_FUZZ_TIMEOUT  the most seconds one input may take (default 10)
#   NANO_FUZZ_RSS_MB   the memory an input may use, in MB (default 2048)
set -uo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 NAME BUILD_DIR CORPUS_DIR" >&2
  exit 2
fi
name=$1 build=$2 corpus=$3
seconds=${NANO_FUZZ_SECONDS:-20}
status=$(cat "$build/status" 2>/dev/null || echo "skip: the fuzzers are not built (fuzz.build, tests/fuzz/build.sh)")
if [ "$status" != ok ]; then
  echo "SKIP: fuzz.$name: ${status#skip: }"
  exit 77
fi
fuzzer=$build/bin/${name}_fuzz
scratch=$build/scratch/$name
artifacts=$build/artifacts/$name
log=$build/logs/$name.log
rm -rf "$scratch"
mkdir -p "$scratch" "$artifacts" "$(dirname "$log")"
corpora=("$scratch")
if [ -d "$corpus" ]; then corpora+=("$corpus"); fi  # a new target's corpus may not be there yet
# libFuzzer's own exit code for a crash is 77, ctest's "skipped": every failure exits 1 here. New
# inputs go to the first folder, the scratch one. timeout bounds a fuzzer that hangs outside its
# inputs (loading the corpus counts toward max_total_time already).
timeout -k 10 $((seconds + 120)) "$fuzzer" -max_total_time="$seconds" -timeout="${NANO_FUZZ_TIMEOUT:-10}" \
  -rss_limit_mb="${NANO_FUZZ_RSS_MB:-2048}" -error_exitcode=1 -timeout_exitcode=1 -print_final_stats=1 \
  -artifact_prefix="$artifacts/" "${corpora[@]}" >"$log" 2>&1
rc=$?
executions=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
if [ "$rc" -eq 0 ]; then
  echo "PASS: fuzz.$name: ${executions:-0} executions, 0 crashes (in ${seconds} s; log $log)"
  exit 0
fi
tail -n 60 "$log"
reproducer=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
if [ -n "$reproducer" ]; then
  echo "FAIL: fuzz.$name: a crash after ${executions:-?} executions: reproducer $reproducer (run $fuzzer $reproducer)"
elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  echo "FAIL: fuzz.$name: still running $((seconds + 120)) s after it started (log $log)"
else
  echo "FAIL: fuzz.$name: exit $rc without a reproducer (log $log)"
fi
exit 1
