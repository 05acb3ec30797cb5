"""What the Python API's process-level tests share (api_test.py, lite_test.py): real callers started
as processes, bounded by a timeout, their output read, and what they left behind found.
Each test program is run as `PROGRAM BUILD_DIR CASE` and ends through main(cases)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(sys.argv[1])
CASE = sys.argv[2]
PYDIR = os.path.join(BUILD, "lib", "nano", "python")
PYTHON = sys.executable
CALLERS = []  # pids of the callers this test started: the launchers of their jobs


class Failure(Exception):
    pass


def check(condition, why):
    if not condition:
        raise Failure(why)


def environment(tmp):
    return dict(os.environ, PYTHONPATH=PYDIR, TMPDIR=tmp, OMPI_ALLOW_RUN_AS_ROOT="1",
                OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1")


def run(argv, tmp, timeout=120, stdin=None, env=None, cwd=None):
    """A caller program to its end (`env`: variables over environment(tmp), `cwd`: its working
    folder); (exit code, stdout, stderr, seconds)."""
    started = time.monotonic()
    p = subprocess.Popen([PYTHON] + argv, env=dict(environment(tmp), **(env or {})), stdin=subprocess.PIPE if stdin else None,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True, cwd=cwd)
    CALLERS.append(p.pid)
    try:
        out, err = p.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise Failure(f"{argv} did not end within {timeout} s: {err[-800:]}")
    return p.returncode, out, err, time.monotonic() - started


def last_json(out, err):
    lines = [line for line in out.splitlines() if line.startswith("{")]
    check(lines, f"no result line; stdout {out[-600:]!r} stderr {err[-1200:]!r}")
    return json.loads(lines[-1])


def leftovers(tmp):
    """What this test's callers left once they ended: /dev/shm entries of their jobs
    (nano-CALLERPID-...) and of the tensors they shared (torch_CALLERPID_...), and anything in
    their TMPDIR. torch's shared-memory manager, which owns the latter two, ends by itself once its
    last client has: it gets 10 s."""
    mine = {str(pid) for pid in CALLERS}
    deadline = time.monotonic() + 10
    while True:
        left = sorted(n for n in os.listdir("/dev/shm") if (n.startswith("nano-") and n.split("-")[1] in mine)
                      or (n.startswith("torch_") and n.split("_")[1] in mine)) + sorted(os.listdir(tmp))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def main(cases):
    """Runs CASE of `cases` in a fresh TMPDIR; PASS or FAIL, and nothing left behind."""
    tmp = tempfile.mkdtemp(prefix="nano-python-api-")
    try:
        cases[CASE](tmp)
        left = leftovers(tmp)
        check(not left, f"left in /dev/shm or the callers' TMPDIR: {left}")
        print(f"PASS: {CASE}")
        return 0
    except Failure as e:
        print(f"FAIL: {CASE}: {e}")
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

