#!/usr/bin/python3
"""Runs PyTorch's own distributed test suite (torch/testing/_internal/distributed/
distributed_test.py, shipped with python3-torch) against one backend at one world size, and
records every test's outcome.

torch runs that suite for its own backends through test_distributed_spawn.py, which Debian does
not ship; this is nano's driver for it. It treats `nano` as a CPU backend with Gloo's features:
the suite gates many tests on the backend's name (`BACKEND != "gloo"`, `require_backend({"gloo"})`,
DistTestCases' feature sets), and the driver widens each of those gates to admit "nano" before
the suite's module is executed (GATES below; each group must match, so a torch whose suite changed
shape is noticed). On a gloo run the widened gates change nothing, so both backends run the
same tests, side by side (scripts/torch-suite.sh).

Each test's ranks are forked from this process (the suite's own spawn start would import torch
again in every rank of every test), and each test is bounded by --per-test seconds. The harness's
own waits (each test's file barriers, the parent's wait for its ranks) poll every POLL seconds
instead of 0.1 (QUICK_POLLS): most of a test's time was those polls, not the test.

Usage: suite.py BUILD_DIR BACKEND WORLD_SIZE [--json FILE] [--per-test S] [-k SUBSTRING]...
Prints one line per test ("PASS|SKIP|FAIL|XFAIL NAME seconds [why]") and a summary line
"suite: BACKEND at N ranks: P passed, S skipped, F failed in T s"; exits 0 however the tests
went (the caller judges them), 2 on bad arguments, 1 where this torch's suite gates its tests in
a way GATES does not know.
"""
import argparse
import importlib.util
import json
import os
import sys
import time
import unittest

import compare  # beside this file: the counts every report of the suite gives

HERE = os.path.dirname(os.path.abspath(__file__))
SUITE = "torch.testing._internal.distributed.distributed_test"

# The suite's gates on the backend's name, widened to admit nano: (what the suite says, what the
# driver makes of it). Read as text, they are the whole of the change to torch's file. Each
# group must match at least once (its forms are torch 1.13's and 2.x's spellings).
GLOO_LIKE = '("gloo", "nano")'
GATES = [
    [('BACKEND == "gloo"', f"BACKEND in {GLOO_LIKE}")],
    [('BACKEND != "gloo"', f"BACKEND not in {GLOO_LIKE}")],
    [('require_backend({"gloo"})', 'require_backend({"gloo", "nano"})'),
     ('require_backend_is_available({"gloo"})', 'require_backend_is_available({"gloo", "nano"})')],
]
# DistTestCases' feature sets (common_distributed.py) that hold gloo: nano joins them. "gpu"
# also gates tests that run on the CPU under Gloo (the object collectives); a test that needs a
# device still skips on its own device check. ("cuda" gates only tests of CUDA tensors.)
FEATURES = ("ddp", "subgroup", "gpu")
# ... and the set of backends registered from outside torch, which nano is: torch 2's
# availability check admits those.
PLUGIN = "plugin"
# The harness's polls, from 0.1 s to POLL: the suite's file barrier (Barrier.sync, twice a test),
# as text like GATES (it must match once), and the parent's wait for its ranks (_join_processes,
# common_distributed's only sleep: QuickPolls). A test's own sleeps are untouched. At 2 ranks
# the suite ran in 41 s instead of 67 s, on the same CPU time.
POLL = 0.005
QUICK_POLLS = ("time.sleep(0.1)", f"time.sleep({POLL})")


class QuickPolls:
    """The `time` module as common_distributed sees it, whose sleeps last at most POLL."""

    def __getattr__(self, name):
        return getattr(time, name)

    @staticmethod
    def sleep(seconds):
        time.sleep(min(seconds, POLL))


def parse(argv):
    parser = argparse.ArgumentParser(prog="suite.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("build")
    parser.add_argument("backend", choices=["nano", "gloo"])
    parser.add_argument("world_size", type=int)
    parser.add_argument("--json", help="write {test: [outcome, seconds, why]} here")
    parser.add_argument("--per-test", type=int, default=120, help="seconds each test may take (default 120)")
    parser.add_argument("-k", dest="only", action="append", default=[], help="run only tests whose name holds this")
    args = parser.parse_args(argv)
    if args.world_size < 2:
        parser.error(f"world size {args.world_size}: the suite needs 2 or more ranks")
    if args.per_test < 1:
        parser.error(f"--per-test {args.per_test}: must be 1 or more seconds")
    return args


def load_suite(backend):
    """Imports the suite's module with its name gates widened (GATES; for nano, FEATURES and
    PLUGIN too: on a gloo run nano is not registered, and a set naming it would be looked up)
    and the harness's polls quickened (QUICK_POLLS, QuickPolls) for either backend."""
    try:
        import expecttest  # noqa: F401
    except ImportError:
        sys.path.insert(0, os.path.join(HERE, "shim"))
    from torch.testing._internal import common_distributed

    features = common_distributed.DistTestCases.backend_feature
    if backend == "nano":
        for feature in FEATURES:
            if "gloo" in features[feature]:
                features[feature].add("nano")
        features[PLUGIN].add("nano")
    with open(common_distributed.__file__) as f:
        sleeps = f.read().count("time.sleep(")
    if sleeps != 1:
        raise SystemExit(f"suite.py: {common_distributed.__file__} sleeps in {sleeps} places, not only in "
                         "_join_processes: update QuickPolls")
    common_distributed.time = QuickPolls()
    spec = importlib.util.find_spec(SUITE)
    with open(spec.origin) as f:
        source = f.read()
    said, made = QUICK_POLLS
    if source.count(said) != 1:
        raise SystemExit(f"suite.py: {spec.origin} has {source.count(said)} of {said!r}, not only "
                         "Barrier.sync's: update QUICK_POLLS")
    source = source.replace(said, made)
    for group in GATES:
        if not any(said in source for said, _ in group):
            raise SystemExit(f"suite.py: {spec.origin} has none of {[said for said, _ in group]}: this "
                             "torch's suite gates tests differently; update GATES")
        for said, made in group:
            source = source.replace(said, made)
    module = importlib.util.module_from_spec(spec)
    sys.modules[SUITE] = module
    exec(compile(source, spec.origin, "exec"), module.__dict__)
    return module, common_distributed


class Outcomes(unittest.TestResult):
    """Each test's outcome, as it ends: [PASS|SKIP|FAIL|XFAIL, seconds, why]."""

    def __init__(self):
        super().__init__()
        self.outcomes = {}
        self.started = 0.0

    def startTest(self, test):
        super().startTest(test)
        self.started = time.monotonic()

    def _record(self, test, outcome, why=""):
        name = test.id().split(".")[-1]
        seconds = round(time.monotonic() - self.started, 2)
        why = " ".join(why.split())[-300:]
        self.outcomes[name] = [outcome, seconds, why]
        print(f"{outcome} {name} {seconds:.1f}s {why}".rstrip(), flush=True)

    def addSuccess(self, test):
        self._record(test, "PASS")

    def addSkip(self, test, reason):
        self._record(test, "SKIP", reason)

    def addExpectedFailure(self, test, err):
        self._record(test, "XFAIL")

    def addUnexpectedSuccess(self, test):
        self._record(test, "FAIL", "passed, but the suite expects it to fail")

    def addFailure(self, test, err):
        self._record(test, "FAIL", self._last_line(err, test))

    def addError(self, test, err):
        self._record(test, "FAIL", self._last_line(err, test))

    def _last_line(self, err, test):
        text = self._exc_info_to_string(err, test).strip()
        # The ranks' own exception is in the text: its last "...Error: ..." line says the most.
        lines = [line for line in text.splitlines() if line.strip()]
        raised = [line for line in lines if "Error" in line or "Exception" in line]
        return (raised or lines or ["failed"])[-1]


def main(argv):
    args = parse(argv)
    os.environ.update(BACKEND=args.backend, WORLD_SIZE=str(args.world_size))
    sys.path.insert(0, os.path.join(os.path.abspath(args.build), "lib", "nano", "python"))
    import torch

    if args.backend == "nano":
        import nano_torch  # noqa: F401  (registers the backend before the ranks are forked)

    suite, common_distributed = load_suite(args.backend)
    common_distributed.TIMEOUT_DEFAULT = args.per_test
    common_distributed.TIMEOUT_OVERRIDE.clear()

    class TestBackend(suite.TestDistBackend, suite.DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            self._start_processes(torch.multiprocessing.get_context("fork").Process)

    names = [n for n in unittest.TestLoader().getTestCaseNames(TestBackend)
             if not args.only or any(k in n for k in args.only)]
    tests = unittest.TestSuite(TestBackend(n) for n in names)
    result = Outcomes()
    started = time.monotonic()
    TestBackend.setUpClass()
    try:
        tests.run(result)
    finally:
        TestBackend.tearDownClass()
    counts = compare.counts(result.outcomes)
    print(f"suite: {args.backend} at {args.world_size} ranks (torch {torch.__version__}): "
          f"{counts['PASS']} passed, {counts['SKIP']} skipped, {counts['FAIL']} failed "
          f"in {time.monotonic() - started:.0f} s", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"backend": args.backend, "world_size": args.world_size, "torch": torch.__version__,
                       "outcomes": result.outcomes}, f, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
