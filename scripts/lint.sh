#!/usr/bin/env bash
# The tree's habits, checked (scripts/test.sh runs this after the build):
#   1. every C++ file is formatted as .clang-format says (clang-format 14, Debian 12's);
#   2. clang-tidy 14 with .clang-tidy's checks passes over the torch-free sources (core/,
#      launcher/, cli/), using the build folder's compile_commands.json. The runtime's files are left
#      out here because each takes clang-tidy most of a minute through torch's headers on a
#      2-core machine; `scripts/lint.sh --all` includes them.
# Usage: scripts/lint.sh [--fix] [--all] [BUILD_DIR]   (--fix formats the tree in place)
set -euo pipefail
cd "$(dirname "$0")/.."
fix=0 all=0 build=${NANO_BUILD_DIR:-build}
for arg in "$@"; do
  case "$arg" in
    --fix) fix=1 ;;
    --all) all=1 ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "lint.sh: unknown option $arg" >&2; exit 2 ;;
    *) build=$arg ;;
  esac
done
format=$(command -v clang-format-14 || true)
tidy=$(command -v clang-tidy-14 || true)
if [ -z "$format" ] || [ -z "$tidy" ]; then
  echo "lint.sh: clang-format-14 and clang-tidy-14 are needed (scripts/install-deps.sh on Debian 12)" >&2
  exit 2
fi
mapfile -t sources < <(git ls-files '*.c' '*.cc' '*.h')
if [ "$fix" = 1 ]; then
  "$format" -i "${sources[@]}"
  exit 0
fi
echo "lint.sh: clang-format over ${#sources[@]} files"
"$format" --dry-run --Werror "${sources[@]}"

if [ ! -f "$build/compile_commands.json" ]; then
  echo "lint.sh: no $build/compile_commands.json (configure the build first)" >&2
  exit 2
fi
pattern='^(cli|core|launcher)/.*\.cc$'
if [ "$all" = 1 ]; then pattern='^(cli|core|launcher|runtime|python|examples|bench)/.*\.cc$'; fi
mapfile -t tidy_sources < <(git ls-files '*.cc' | grep -E "$pattern")
echo "lint.sh: clang-tidy over ${#tidy_sources[@]} files"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
printf '%s\n' "${tidy_sources[@]}" | xargs -P "$(nproc)" -n 4 "$tidy" -p "$build" --quiet >"$out" 2>&1 || status=$?
grep -v -e '^[0-9]* warnings\{0,1\} generated\.$' -e '^Suppressed [0-9]* warnings' -e '^Use -header-filter' "$out" || true
if [ "$status" -ne 0 ]; then
  echo "lint.sh: clang-tidy found problems (above)" >&2
  exit 1
fi
echo "lint.sh: clean"
