#!/usr/bin/python3
"""PyTorch's own distributed test suite against the `nano` backend, as part of nano's tests:
runs suite.py for nano at one world size and judges the outcome. Prints "PASS: suite_N" or
"FAIL: suite_N: why".

It fails when
- a test fails that is not in known.py's table of explained failures for this torch;
- a test in that table passes (the table would then hide a regression: the entry must go);
- fewer tests pass than known.py's floor for this torch (tests skipped that ran before);
- the run leaves anything of nano's in /dev/shm, or any rank process alive.

Usage: suite_test.py BUILD_DIR WORLD_SIZE
"""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare  # noqa: E402
import known  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
WORLD = int(sys.argv[2])
CASE = f"suite_{WORLD}"
# The suite's ranks name their shared memory after NANO_JOB_ID (/nano-<job>-<pid>-<n>). A job id of
# this run's own keeps the check below to what the suite made: ctest runs other tests beside this
# one, and their jobs' files come and go in /dev/shm while the suite runs.
JOB = f"torch-suite-{WORLD}-{os.getpid()}"


def nano_entries():
    return {e for e in os.listdir("/dev/shm") if e.startswith(f"nano-{JOB}-")}


def main():
    before = nano_entries()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "outcomes.json")
        # The suite bounds each test (120 s); this bounds the whole, should a rank outlive its test.
        # Its own session holds every rank it forks, so what is left of it afterwards can be found.
        driver = subprocess.Popen([sys.executable, os.path.join(HERE, "suite.py"), BUILD, "nano", str(WORLD),
                                   "--json", out], cwd=tmp, env=dict(os.environ, NANO_JOB_ID=JOB),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            output, _ = driver.communicate(timeout=1400)  # inside ctest's 1500 s, to report and clean up
        except subprocess.TimeoutExpired:
            subprocess.run(["pkill", "-KILL", "-s", str(driver.pid)])
            output, _ = driver.communicate(timeout=30)
            return f"the suite ran past 1400 s: {' | '.join(output.splitlines()[-3:])}"
        left = subprocess.run(["pgrep", "-s", str(driver.pid)], stdout=subprocess.PIPE, text=True).stdout.split()
        if left:
            subprocess.run(["pkill", "-KILL", "-s", str(driver.pid)])
        lines = output.splitlines()
        print("\n".join(line for line in lines if line.startswith(("PASS ", "FAIL ", "XFAIL ", "suite:"))))
        if left:
            return f"rank processes outlived the suite: {left}"
        if driver.returncode != 0 or not os.path.exists(out):
            return f"suite.py exit {driver.returncode}: {' | '.join(lines[-5:])}"
        with open(out) as f:
            report = json.load(f)
    explained = known.failures(report["torch"], WORLD)
    failed = {name for name, (outcome, _, _) in report["outcomes"].items() if outcome == "FAIL"}
    unexplained = sorted(failed - set(explained))
    if unexplained:
        return "unexplained failures: " + "; ".join(f"{n}: {report['outcomes'][n][2]}" for n in unexplained)
    stale = sorted(n for n in explained if report["outcomes"].get(n, ["absent"])[0] != "FAIL")
    if stale:
        return ("known.py explains failures that did not happen (remove them): "
                + ", ".join(f"{n} ({report['outcomes'].get(n, ['absent'])[0]})" for n in stale))
    left = nano_entries() - before
    if left:
        return f"left in /dev/shm: {sorted(left)}"
    # Gates that stopped admitting nano would turn tests into skips, not failures: a floor on the
    # passes (what Gloo passes here, less the explained failures) catches that.
    passed = compare.counts(report["outcomes"])["PASS"]
    floor = known.least_passed(report["torch"], WORLD)
    if passed < floor:
        return f"{passed} tests passed, fewer than the {floor} nano passes with this torch: skipped instead?"
    for name in sorted(failed):
        print(f"explained: {name}: {explained[name]}")
    return None


if __name__ == "__main__":
    why = main()
    print(f"FAIL: {CASE}: {why}" if why else f"PASS: {CASE}")
    sys.exit(1 if why else 0)
