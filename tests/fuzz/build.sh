#!/usr/bin/env bash
# Builds the fuzzers (tests/fuzz/CMakeLists.txt configured on its own) with clang, instrumented
# for libFuzzer, ASan and UBSan, into BUILD_DIR; ctest's fuzz.build and scripts/fuzz.sh run it.
# Exits 77 with one line when no clang++ with libFuzzer is here (ctest counts it skipped), and
# fails when a fuzzer's sources pull in a torch header (they must stay torch-free).
# Usage: tests/fuzz/build.sh SOURCE_DIR BUILD_DIR
#   NANO_FUZZ_CXX  the clang++ to use (default: clang++, else the newest clang++-N here)
#   NANO_FUZZ_JOBS compile jobs (default 2)
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 SOURCE_DIR BUILD_DIR" >&2
  exit 2
fi
source_dir=$(cd "$1" && pwd)
mkdir -p "$2"
build=$(cd "$2" && pwd)
status=$build/status  # run.sh reads it: "ok", or "skip: why"

cxx=${NANO_FUZZ_CXX:-}
if [ -z "$cxx" ]; then
  for candidate in clang++ clang++-{25..14}; do
    if command -v "$candidate" >/dev/null; then
      cxx=$(command -v "$candidate")
      break
    fi
  done
fi
# The C compiler beside it (launcher/source_filter/source_filter.c): clang++-14 -> clang-14.
cc=$(dirname "${cxx:-/x}")/$(basename "${cxx:-clang++}" | sed 's/clang++/clang/')

# libFuzzer's runtime comes apart from clang on Debian (libclang-rt-N-dev): try a fuzzer's link.
probe_dir=$(mktemp -d)
trap 'rm -rf "$probe_dir"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe_dir/p.cc"
if [ -z "$cxx" ] || [ ! -x "$cc" ] ||
  ! "$cxx" -fsanitize=fuzzer,address,undefined "$probe_dir/p.cc" -o "$probe_dir/p" >"$probe_dir/log" 2>&1; then
  why="no clang++ with libFuzzer here (${cxx:-no clang++ found}; Debian: clang and libclang-rt-N-dev)"
  echo "skip: $why" >"$status"
  echo "SKIP: fuzz.build: $why"
  exit 77
fi

# One build at a time in a folder (ctest's fixture runs this once; scripts/fuzz.sh may run beside it).
exec 9>"$build/.lock"
if ! flock -w 900 9; then
  echo "FAIL: fuzz.build: $build is locked by another build for 15 minutes"
  exit 1
fi
rm -f "$status"
generator=()
if command -v ninja >/dev/null; then generator=(-G Ninja); fi
if [ ! -f "$build/CMakeCache.txt" ]; then
  timeout 300 cmake -S "$source_dir/tests/fuzz" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=None \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_C_COMPILER="$cc" -DNANO_SOURCE_DIR="$source_dir" >"$build/configure.log" 2>&1 ||
    {
      tail -n 30 "$build/configure.log"
      echo "FAIL: fuzz.build: configuring $build failed ($build/configure.log)"
      exit 1
    }
fi
start=$(date +%s)
if ! timeout 840 cmake --build "$build" --parallel "${NANO_FUZZ_JOBS:-2}" >"$build/build.log" 2>&1; then
  tail -n 40 "$build/build.log"
  echo "FAIL: fuzz.build: the fuzzers did not build ($build/build.log)"
  exit 1
fi

# The fuzzers stand on torch-free sources only: no object may have read a torch header (Debian's
# libtorch puts them on the default include path, so an include would compile unnoticed).
if [ -f "$build/build.ninja" ]; then
  deps=$(ninja -C "$build" -t deps)
else
  deps=$(find "$build" -name '*.o.d' -exec cat {} +)
fi
torch=$(grep -E '/(torch|c10|ATen|caffe2)/' <<<"$deps" | sort -u | head -n 5 || true)
if [ -n "$torch" ]; then
  echo "$torch"
  echo "FAIL: fuzz.build: a fuzzer's sources include torch headers (above); the fuzzers build only torch-free sources"
  exit 1
fi
echo ok >"$status"
echo "PASS: fuzz.build: $(ls "$build"/bin/*_fuzz | wc -l) fuzzers in $build/bin with $(basename "$cxx") ($(($(date +%s) - start)) s)"
