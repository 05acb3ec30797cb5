"""Starts N ranks of a Python program with torchrun's environment on this host, and ends them:
what the torch backend's tests use where they need to see each rank's own outcome (nano-run
stops every rank at the first failure, which is right for users and wrong for asserting what
the survivors said).

    ranks = start(3, ["prog.py", "--flag"], env={"NANO_SHM_BYTES": "0"})
    results = finish(ranks, timeout=60)   # [Result(rank, code, out, err, seconds)]
"""
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
from free_port import free_port  # noqa: E402,F401  (also for the tests)

PYTHON = sys.executable  # the interpreter the tests run under: the one the backend was built for


STARTED_PIDS = []  # every rank this process started, for nano_shm_entries()


@dataclass
class Rank:
    rank: int
    process: subprocess.Popen
    started: float


@dataclass
class Result:
    rank: int
    code: int
    out: str
    err: str
    seconds: float


def start(n, argv, python_dir, env=None, threads=1):
    """N processes of `argv` (a Python program and its arguments), each its own session, with
    RANK/WORLD_SIZE/LOCAL_*/MASTER_* set and nano_torch on PYTHONPATH."""
    port = free_port()
    ranks = []
    for r in range(n):
        e = dict(os.environ)
        e.update(RANK=str(r), LOCAL_RANK=str(r), WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n), GROUP_RANK="0",
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), USE_LIBUV="0", OMP_NUM_THREADS=str(threads),
                 PYTHONPATH=python_dir + (":" + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""))
        e.update(env or {})
        p = subprocess.Popen([PYTHON] + list(argv), env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True)
        ranks.append(Rank(r, p, time.monotonic()))
        STARTED_PIDS.append(p.pid)
    return ranks


def kill_all(ranks):
    for r in ranks:
        if r.process.poll() is None:
            try:
                os.killpg(r.process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def finish(ranks, timeout):
    """Waits for every rank at most `timeout` seconds in all, then SIGKILLs what is left (its
    code is then -9). Returns each rank's Result."""
    deadline = time.monotonic() + timeout
    results = []
    for r in ranks:
        try:
            out, err = r.process.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill_all(ranks)
            out, err = r.process.communicate()
        results.append(Result(r.rank, r.process.returncode, out, err, time.monotonic() - r.started))
    return results


def nano_shm_entries():
    """The /dev/shm names the backend made for the ranks started here (/nano-PID-N, or
    /nano-JOB-PID-N under nano-run), to check nothing is left; other jobs' (tests running
    beside this one) are not counted."""
    mine = [str(pid) for pid in STARTED_PIDS]
    return sorted(n for n in os.listdir("/dev/shm")
                  if n.startswith("nano-") and any(part in mine for part in n.split("-")[1:3]))
