#!/usr/bin/env bash
# The Debian 13 ("trixie": libtorch 2.6, Open MPI 5, GCC 14) leg of the tests: scripts/test.sh
# inside the Debian 13 root that scripts/debian13-root.sh keeps, with build folder
# build-debian13. CI's second leg. Needs root. Usage: scripts/test-debian13.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
exec scripts/debian13-root.sh env NANO_BUILD_DIR=build-debian13 NANO_JOBS="${NANO_JOBS:-}" scripts/test.sh "$@"
