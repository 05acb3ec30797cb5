#!/usr/bin/python3
"""Sets nano's outcomes in PyTorch's distributed suite beside Gloo's: reads the files suite.py
--json wrote (one per backend and world size) and prints a table of passed/skipped/failed per
world size, then every test whose outcome differs between the two backends, with nano's reason.

Usage: compare.py FILE.json...   (scripts/torch-suite.sh runs the suite and then this)
"""
import json
import sys

OUTCOMES = ("PASS", "SKIP", "FAIL")


def counts(outcomes):
    """passed (XFAIL counts as passed, as the suite means it), skipped, failed."""
    c = {k: 0 for k in OUTCOMES}
    for outcome, _, _ in outcomes.values():
        c["PASS" if outcome == "XFAIL" else outcome] += 1
    return c


def differences(gloo, nano):
    """[(test, gloo's outcome, nano's outcome, nano's why)] where the two differ."""
    rows = []
    for name in sorted(set(gloo) | set(nano)):
        g = gloo.get(name, ["absent", 0, ""])
        n = nano.get(name, ["absent", 0, ""])
        if g[0] != n[0]:
            rows.append((name, g[0], n[0], n[2] or g[2]))
    return rows


def main(paths):
    if not paths:
        print("usage: compare.py FILE.json...", file=sys.stderr)
        return 2
    runs = {}
    for path in paths:
        with open(path) as f:
            report = json.load(f)
        runs[(report["world_size"], report["backend"])] = report
    sizes = sorted({size for size, _ in runs})
    torch_versions = sorted({r["torch"] for r in runs.values()})
    print(f"PyTorch's distributed_test.py, torch {', '.join(torch_versions)}: passed / skipped / failed")
    print()
    print("| ranks | gloo | nano | tests that differ |")
    print("|---|---|---|---|")
    for size in sizes:
        cells = []
        for backend in ("gloo", "nano"):
            report = runs.get((size, backend))
            cells.append(" / ".join(str(counts(report["outcomes"])[k]) for k in OUTCOMES) if report else "not run")
        both = runs.get((size, "gloo")), runs.get((size, "nano"))
        differ = len(differences(both[0]["outcomes"], both[1]["outcomes"])) if all(both) else "-"
        print(f"| {size} | {cells[0]} | {cells[1]} | {differ} |")
    for size in sizes:
        gloo, nano = runs.get((size, "gloo")), runs.get((size, "nano"))
        if gloo and nano:
            rows = differences(gloo["outcomes"], nano["outcomes"])
            if rows:
                print()
                print(f"At {size} ranks (gloo -> nano):")
                for name, g, n, why in rows:
                    print(f"- {name}: {g} -> {n}" + (f": {why}" if why else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
