#!/usr/bin/env bash
# What scripts/test.sh says after its tests: the ten slowest, the leg's total, and the budget.
# Usage: scripts/test-summary.sh CTEST_LOG WALL_SECONDS BUDGET_SECONDS CTEST_ARG_COUNT
# CTEST_LOG holds ctest's lines ("  3/147 Test  #85: python.torch_suite.3 ....   Passed   64.74 sec").
# The budget is compared only for a whole run (no ctest arguments selecting a subset).
set -euo pipefail
log=$1 wall=$2 budget=$3 selected=$4
awk -v wall="$wall" -v budget="$budget" -v selected="$selected" '
  / Test +#[0-9]+: / {
    name = $0; sub(/.*Test +#[0-9]+: /, "", name); sub(/ .*/, "", name)
    seconds = $(NF - 1)
    if ($NF == "sec" && seconds ~ /^[0-9.]+$/) { n++; names[n] = name; times[n] = seconds; total += seconds }
  }
  END {
    if (n == 0) exit
    # the ten slowest, by a selection that needs no sort program
    printf "test.sh: the slowest tests of this run (seconds each, with the tests beside them):\n"
    for (k = 1; k <= 10 && k <= n; k++) {
      best = 0
      for (i = 1; i <= n; i++) if (!(i in shown) && (best == 0 || times[i] + 0 > times[best] + 0)) best = i
      shown[best] = 1
      printf "  %7.1f  %s\n", times[best], names[best]
    }
    printf "test.sh: %d tests, %.0f s of test time in %d s of wall time\n", n, total, wall
    if (selected > 0) exit
    if (wall > budget)
      printf "test.sh: over this leg'"'"'s budget of %d s by %d s (docs/developing.md, \"The test budget\"): a finding for the next change, not a failure\n", budget, wall - budget
    else
      printf "test.sh: within this leg'"'"'s budget of %d s\n", budget
  }' "$log"
