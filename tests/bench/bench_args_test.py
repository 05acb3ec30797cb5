#!/usr/bin/python3
"""The benchmarks' and the suite driver's bad arguments: each is refused with exit 2 and a line
that names the bad value, before anything starts (no rank, no group, nothing in /dev/shm). The
Python scripts' lines are argparse's, after its usage line, as every argparse program words them.
Prints "PASS: bench_args" or "FAIL: bench_args: why".

Usage: bench_args_test.py SOURCE_DIR BUILD_DIR
"""
import os
import subprocess
import sys

SOURCE, BUILD = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
PY = sys.executable  # the Python with torch that runs this test (NANO_TORCH_PYTHON)
BENCH = os.path.join(BUILD, "bench", "nano_bench_allreduce")
TORCH_ALLREDUCE = os.path.join(SOURCE, "bench", "python", "torch_allreduce.py")
SUITE = os.path.join(SOURCE, "tests", "python", "torch_suite", "suite.py")

# (command, the value its error line must name)
CASES = [
    ([BENCH, "abc"], "'abc'"),
    ([BENCH, "-1"], "'-1'"),
    ([BENCH, "1e300"], "'1e300'"),
    ([BENCH, "4", "0"], "'0'"),
    ([BENCH, "4", "2.5"], "'2.5'"),
    ([BENCH, "4", "3", "float64"], "'float64'"),
    ([BENCH, "4", "3", "float32", "extra"], "'extra'"),
    ([PY, TORCH_ALLREDUCE, "--dtypes", "float32,int8"], "'int8'"),
    ([PY, TORCH_ALLREDUCE, "--sizes", "4,x"], "'x'"),
    ([PY, TORCH_ALLREDUCE, "--sizes", "0"], "'0'"),
    ([PY, TORCH_ALLREDUCE, "--reps", "0"], "--reps 0"),
    ([PY, SUITE, BUILD, "nano", "1"], "world size 1"),
    ([PY, SUITE, BUILD, "mpi", "2"], "'mpi'"),
    ([PY, SUITE, BUILD, "nano", "2", "--per-test", "0"], "--per-test 0"),
    (["bash", os.path.join(SOURCE, "scripts", "bench.sh"), "nonsense"], "'nonsense'"),
    (["bash", os.path.join(SOURCE, "scripts", "bench.sh"), "elastic", BUILD, "x"], "'x'"),
    (["bash", os.path.join(SOURCE, "scripts", "torch-suite.sh"), BUILD, "2,x"], "'2,x'"),
    (["bash", os.path.join(SOURCE, "scripts", "torch-suite.sh"), "/nonexistent"], "/nonexistent"),
]


# What these commands would start (the C++ bench's ranks, torch_allreduce.py's and the suite's)
# names its shared memory after NANO_JOB_ID (/nano-<job>-...): a job id of this test's own keeps
# the check to them, while other tests' jobs come and go in /dev/shm beside it.
JOB = f"bench-args-{os.getpid()}"


def nano_shm():
    return {e for e in os.listdir("/dev/shm") if e.startswith(f"nano-{JOB}-")}


def main():
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "lib", "nano", "python"), NANO_JOB_ID=JOB)
    before = nano_shm()
    for argv, named in CASES:
        shown = " ".join(os.path.basename(a) if os.path.isabs(a) and a != BUILD else a for a in argv)
        p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=120)
        last = (p.stderr.strip().splitlines() or [""])[-1]
        print(f"{shown}: exit {p.returncode}: {last}")
        if p.returncode != 2:
            return f"{shown}: exit {p.returncode}, not 2: {p.stderr.strip()[-300:]}"
        if named not in last:
            return f"{shown}: the error line does not name {named}: {last!r}"
        if p.stdout.strip():
            return f"{shown}: printed on stdout before refusing: {p.stdout.strip()[-200:]!r}"
    left = nano_shm() - before
    if left:
        return f"left in /dev/shm: {sorted(left)}"
    return None


if __name__ == "__main__":
    why = main()
    print(f"FAIL: bench_args: {why}" if why else "PASS: bench_args")
    sys.exit(1 if why else 0)
