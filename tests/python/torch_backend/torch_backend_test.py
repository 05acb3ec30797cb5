#!/usr/bin/python3
"""Process-level tests of the `nano` torch.distributed backend (python/torch_backend.h,
python/) on Debian's python3-torch. Each case starts real ranks, bounds them by a
timeout, and checks that nothing is left in /dev/shm. Prints "PASS: CASE" or "FAIL: CASE: why".

Usage: torch_backend_test.py BUILD_DIR CASE
  collectives_2 | collectives_3            every collective x dtype x op against Gloo, shared memory
  collectives_chunked                      the same, 4 KiB areas (many chunks per tensor)
  collectives_gloo_path                    the same with NANO_SHM_BYTES=0: all through Gloo inside
  ddp_bit_identical                        2 ranks under nano-run: nano's weights == gloo's, bit for bit
  ddp_3_4_ranks                            3 and 4 ranks: nano's weights match gloo's to float tolerance
  ddp_join                                 uneven shards under DDP's join(): nano's weights match gloo's
  ddp_comm_hooks                           torch's fp16 and PowerSGD communication hooks
  fault_kill | fault_stop | fault_absent   a rank killed / stopped inside all_reduce, or never joining
  nano_run_finds_module                    under nano-run, `import nano_torch` needs no PYTHONPATH
  mismatch                                 collectives that do not match (size, dtype, all_gather size,
                                           broadcast src, kind, all_reduce against barrier; mismatch_check.py),
                                           and a DDP job logging its loss at other steps: one line naming
                                           both calls, a failed job, no value printed, nothing left
  mismatch_gloo_path                       with NANO_SHM_BYTES=0 (signatures through Gloo): a size and a kind
  leaver                                   a rank that leaves early (sys.exit(0)), and one rank's extra
                                           collective after its peer ended normally: the one that left is
                                           named with the collective it made last and the one waited in,
                                           by the rank and by nano-run, and the rank that ended normally
                                           is not the root cause
  rendezvous_bound                         rank 0 of 2 alone, init_process_group's timeout 5 s: it fails
                                           naming rank 1 within the bound plus 2.5 s (env://, where torch's
                                           TCPStore waits first, and nano://)
  monitored_barrier                        ProcessGroup.monitored_barrier(1 s) and torch's
                                           dist.monitored_barrier(timeout=1 s) with rank 1 4 s late: rank 0
                                           raises within the timeout plus 1.5 s naming rank 1, on nano as
                                           on gloo
  torchrun                                 under plain torchrun (exit 77, skipped, where this torch's
                                           own torchrun cannot start a gloo program: Debian 12's)
  standalone_sources                       bench/python/build_nano_torch.py (the build for a pip
                                           torch, which ships no Gloo headers) lists every source the
                                           module needs, and none of them reaches a Gloo header
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ranks  # noqa: E402

BUILD = os.path.abspath(sys.argv[1])
CASE = sys.argv[2]
PYDIR = os.path.join(BUILD, "lib", "nano", "python")
NANO_RUN = os.path.join(BUILD, "bin", "nano-run")


class Failure(Exception):
    pass


def check(condition, why):
    if not condition:
        raise Failure(why)


def describe(results):
    return "; ".join(f"rank {r.rank} exit {r.code} after {r.seconds:.1f} s: {r.out.strip()[-600:]!r} "
                     f"{r.err.strip()[-400:]!r}" for r in results)


def collectives(n, env, expect_shm):
    env = dict(env, EXPECT_SHM="1" if expect_shm else "0")
    results = ranks.finish(ranks.start(n, [os.path.join(HERE, "collectives_check.py")], PYDIR, env=env), 200)
    check(all(r.code == 0 for r in results), describe(results))
    for r in results:
        print(f"rank {r.rank}: {r.out.strip().splitlines()[-1]}")


def under_nano_run(argv, n=2, timeout=120, extra_env=None):
    """`python3 ARGV` as n ranks under nano-run (subprocess backend), nano_torch on PYTHONPATH."""
    env = dict(os.environ, PYTHONPATH=PYDIR, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               **(extra_env or {}))
    return subprocess.run([NANO_RUN, "-n", str(n), "--backend", "subprocess", ranks.PYTHON] + argv, env=env,
                          capture_output=True, text=True, timeout=timeout)


def train(launch, backend, n, out, steps=12, hook="none", env=None, uneven=False):
    argv = [os.path.join(HERE, "ddp_train.py"), "--backend", backend, "--steps", str(steps), "--out", out,
            "--hook", hook] + (["--uneven"] if uneven else [])
    if launch == "nano-run":
        p = under_nano_run(argv, n=n, timeout=300)
        check(p.returncode == 0, f"nano-run {backend} exited {p.returncode}: {p.stderr[-800:]}")
        check(f"({backend}, shared memory {backend == 'nano'})" in p.stdout, p.stdout[-400:])
    elif hook == "none":
        results = ranks.finish(ranks.start(n, argv, PYDIR, env=env), 200)
        check(all(r.code == 0 for r in results), describe(results))
    else:
        # With a comm hook, a rank that has not ended after 50 s (a run takes a few seconds)
        # prints every thread's stack and exits: CI once saw such a rank outlive the test's
        # bound with no word, and no local run (60 under a busy loop) has repeated it. That
        # case runs once more, saying so with its stacks; a second failure fails.
        hook_env = dict(env or {}, DDP_TRAIN_STUCK_AFTER="50")
        results = ranks.finish(ranks.start(n, argv, PYDIR, env=hook_env), 70)
        if any(r.code != 0 and "Timeout (0:00:50)" in r.err for r in results):
            print(f"STUCK: {describe(results)[:600]}; running it once more", flush=True)
            for r in results:
                if "Timeout (0:00:50)" in r.err:
                    print(f"rank {r.rank}'s threads:\n{r.err[-6000:]}", flush=True)
            results = ranks.finish(ranks.start(n, argv, PYDIR, env=hook_env), 70)
        check(all(r.code == 0 for r in results), describe(results))


def weights_compare(a, b, exact, atol=1e-5):
    code = f"""
import torch
a, b = torch.load({a!r}), torch.load({b!r})
worst = max((x - y).abs().max().item() for x, y in zip(a.values(), b.values()))
same = all(torch.equal(x, y) for x, y in zip(a.values(), b.values()))
close = all(torch.allclose(x, y, rtol=1e-4, atol={atol}) for x, y in zip(a.values(), b.values()))
print(same, close, worst)
"""
    p = subprocess.run([ranks.PYTHON, "-c", code], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, p.stderr[-500:])
    same, close, worst = p.stdout.split()
    print(f"largest difference {worst}")
    check(same == "True" if exact else close == "True",
          f"weights differ (largest difference {worst}, {'bit-identical' if exact else 'tolerance'} required)")


def fault(case):
    sync = tempfile.mkdtemp(prefix="nano-faults-sync-")
    try:
        fault_in(case, sync)
    finally:
        shutil.rmtree(sync, ignore_errors=True)


def fault_in(case, sync):
    started = time.monotonic()
    rs = ranks.start(2, [os.path.join(HERE, "faults_check.py"), case], PYDIR, env={"NANO_TEST_SYNC_DIR": sync})
    survivor = rs[0]
    # Reap rank 1 as soon as it ends, as a launcher does: a zombie still answers kill(pid, 0).
    if case == "kill":
        threading.Thread(target=rs[1].process.wait, daemon=True).start()
    try:
        out, err = survivor.process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        ranks.kill_all(rs)
        raise Failure(f"rank 0 still running 30 s after the start ({case})")
    seconds = time.monotonic() - started
    peer = rs[1].process
    if case == "stop":
        check(peer.poll() is None, "the stopped rank is gone")
    ranks.kill_all(rs)
    peer.communicate()
    print(f"rank 0 ended {seconds:.1f} s after the start, exit {survivor.process.returncode}: "
          f"{err.strip().splitlines()[-1] if err.strip() else out!r}")
    check(survivor.process.returncode != 0, f"rank 0 exited 0: {out}")
    # The bound: 3 s group timeout (+ start-up); a death is noticed within about 0.1 s.
    bound = {"kill": 15, "stop": 20, "absent": 20}[case]
    check(seconds < bound, f"rank 0 took {seconds:.1f} s (bound {bound} s)")
    # Killed while its all_reduce was queued or running: before or after it joined the collective.
    named = {"kill": r"rank 1 \(pid \d+\) exited (during the collective|after its collective #\d+ while this rank "
                     r"waited in all_reduce\(float32\[4194304\], SUM\))",
             "stop": r"rank 1 \(pid \d+\) did not reach the collective within 3 s",
             # torch 1.13's env:// store lets rank 0 through and the backend names the missing
             # rank; torch 2.x's store itself waits for every rank and counts them.
             "absent": r"1 of 2 ranks did not join the nano process group within 3 s \(missing: 1\)|"
                       r"waiting for clients\. 1/2 clients joined"}[case]
    check(re.search(named, err), f"rank 0's error does not name rank 1 ({named!r}): {err[-600:]}")


def torchrun(tmp):
    """2 ranks under `python3 -m torch.distributed.run`, first on gloo (does torchrun itself
    work here?), then on nano."""
    prog = os.path.join(tmp, "prog.py")
    with open(prog, "w") as f:
        f.write("import sys, datetime, torch, torch.distributed as dist\n"
                "if sys.argv[1] == 'nano':\n    import nano_torch\n"
                "dist.init_process_group(sys.argv[1], timeout=datetime.timedelta(seconds=30))\n"
                "t = torch.ones(100000)\ndist.all_reduce(t)\n"
                "print('rank', dist.get_rank(), 'sum', t[0].item(), flush=True)\n")
    # TMPDIR: torchrun keeps its logs in a torchelastic_* folder it never removes; in the case's
    # own folder they go with it.
    env = dict(os.environ, PYTHONPATH=PYDIR, USE_LIBUV="0", OMP_NUM_THREADS="1", TMPDIR=tmp)
    for backend in ("gloo", "nano"):
        argv = [ranks.PYTHON, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", "2",
                "--master_addr", "127.0.0.1", "--master_port", str(ranks.free_port()), prog, backend]
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        if backend == "gloo" and p.returncode != 0:
            last = (p.stderr.strip().splitlines() or ["?"])[-1]
            print(f"SKIP: torchrun: this torch's own torchrun fails on a gloo program: {last}")
            return 77
        check(p.returncode == 0, f"torchrun with {backend} exited {p.returncode}: {p.stderr[-800:]}")
        check(p.stdout.count("sum 2.0") == 2, f"torchrun with {backend}: {p.stdout}")
        print(f"torchrun, {backend}: {p.stdout.strip()}")
    print(f"PASS: {CASE}")
    return 0


def standalone_sources():
    """The cheap half of building nano_torch against a pip wheel of torch (the real build takes a
    minute of CPU; scripts/bench.sh scaling does it): the source list of build_nano_torch.py
    against the files' own includes and the libraries of runtime/{timeline,rendezvous,collectives}/."""
    root = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
    sys.path.insert(0, os.path.join(root, "bench", "python"))
    import build_nano_torch
    sources = set(build_nano_torch.SOURCES)
    listed = set()
    for folder in ("runtime/timeline", "runtime/rendezvous", "runtime/collectives"):
        with open(os.path.join(root, folder, "CMakeLists.txt")) as f:
            library = re.search(r"nano_runtime_library\(\S+ \S+(.*?)\)", f.read(), re.S).group(1).split()
        listed |= {f"{folder}/{name}" for name in library}
    missing = listed - {"runtime/collectives/gloo_device.cc"} - sources
    check(not missing, f"the collectives' sources missing from build_nano_torch.py: {sorted(missing)}")
    seen, todo = set(), sorted(sources)
    while todo:  # every local file reached through "..." includes, from the listed sources
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        with open(os.path.join(root, path)) as f:
            # What the build for a pip torch leaves out (the launcher, which needs hwloc).
            text = re.sub(r"#ifndef NANO_TORCH_WITHOUT_LAUNCH.*?#endif", "", f.read(), flags=re.S)
        check(not re.search(r"#include [<\"](gloo/|torch/csrc/distributed/c10d/ProcessGroupGloo)", text),
              f"{path} includes a Gloo header, which torch's pip wheels do not ship")
        for inc in re.findall(r'#include "([^"]+)"', text) + re.findall(r"#include <(nano/[^>]+)>", text):
            local = inc if os.path.exists(os.path.join(root, inc)) else os.path.join("include", inc)
            check(os.path.exists(os.path.join(root, local)), f"{path}: {inc} not found")
            todo.append(local)
            cc = local[:-2] + ".cc"
            if local.endswith(".h") and os.path.exists(os.path.join(root, cc)):
                todo.append(cc)
    unlisted = sorted(p for p in seen if p.endswith(".cc") and p not in sources)
    check(not unlisted, f"sources reached by the module's includes but not built by build_nano_torch.py: {unlisted}")
    print(f"{len(sources)} sources, {len(seen)} files reached, none includes a Gloo header")


def root_cause(p):
    """nano-run's root-cause block: its first line ("" = none) and the lines from it on."""
    at = p.stderr.find("nano-run: root cause: ")
    return ("", "") if at < 0 else (p.stderr[at:].splitlines()[0], p.stderr[at:])


MISMATCHES = {
    "sizes": (r"all_reduce\(float32\[1000\], SUM\)", r"all_reduce\(float32\[1\], SUM\)"),
    "dtypes": (r"all_reduce\(float32\[8\], SUM\)", r"all_reduce\(float64\[8\], SUM\)"),
    "all_gather": (r"all_gather\(float32\[4\]\)", r"all_gather\(float32\[2\]\)"),
    "src": (r"broadcast\(float32\[4\], root 0\)", r"broadcast\(float32\[4\], root 1\)"),
    "kinds": (r"all_reduce\(float32\[16\], SUM\)", r"broadcast\(float32\[16\], root 0\)"),
    "barrier": (r"all_reduce\(float32\[3000000\], SUM\)", r"barrier\(\)"),
    # Rank 0 logs at step 10 while rank 1's DDP reduces its gradient bucket (4 x 8 + 4 floats).
    "ddp_log": (r"all_reduce\(float32\[1\], SUM\)", r"all_reduce\(float32\[36\], (SUM|AVG)\)"),
}


def mismatch(extra_env=None, cases=None):
    """Each mismatch in `cases` (all of MISMATCHES when None) under nano-run."""
    for case, (zero, one) in MISMATCHES.items():
        if cases is not None and case not in cases:
            continue
        p = under_nano_run([os.path.join(HERE, "mismatch_check.py"), case], extra_env=extra_env)
        out = p.stdout + p.stderr
        line = rf"nano: collective #\d+ does not match: rank 0 called {zero}, rank 1 called {one}"
        first, block = root_cause(p)
        print(f"{case}: exit {p.returncode}; {first or p.stderr.strip()[-300:]}")
        check(p.returncode != 0, f"{case}: the job exited 0:\n{out[-1500:]}")
        check("VALUE" not in p.stdout, f"{case}: a rank went on with a value:\n{p.stdout[-800:]}")
        # The root cause's own lines (its last stderr lines) carry the mismatch.
        check(re.search(line, block), f"{case}: the root cause does not name both calls ({line!r}):\n"
                                      f"{p.stderr[-1500:]}")


# A rank that left (exited, or destroyed its group) named with its last collective and the one
# its peer waited in.
LEFT = (r"rank {} \(pid \d+\) (exited|left the world \(its communicator was destroyed\)) after its "
        r"collective #\d+ while this rank waited in all_reduce\(float32\[4\], SUM\) #\d+")

# Measured on the 2-core VM: 6.1 s through env:// (torch's TCPStore spends the timeout plus its own
# 1 s before the backend is made; the backend then waits for what is left, and a last 0.1 s
# look), 5.0 s through nano://. The margin covers the tests ctest runs beside this one.
RENDEZVOUS_TIMEOUT_S, RENDEZVOUS_MARGIN_S = 5, 2.5

JOIN_ALONE = """
import datetime, sys, time
import torch.distributed as dist
import nano_torch
t0 = time.monotonic()
try:
    kwargs = {"init_method": sys.argv[1]} if sys.argv[1] != "env://" else {}
    dist.init_process_group("nano", timeout=datetime.timedelta(seconds=%d), **kwargs)
    print("JOINED")
except RuntimeError as e:
    print(f"AFTER {time.monotonic() - t0:.2f} {e}")
""" % RENDEZVOUS_TIMEOUT_S


def rendezvous_bound():
    for method in ("env://", "nano://"):
        # USE_LIBUV=0: Debian's torch 2.6 has no libuv, which its TCPStore asks for by default.
        env = dict(os.environ, PYTHONPATH=PYDIR, RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(ranks.free_port()), USE_LIBUV="0")
        p = subprocess.run([ranks.PYTHON, "-c", JOIN_ALONE, method], env=env, capture_output=True, text=True,
                           timeout=60)
        m = re.search(r"AFTER ([0-9.]+) (.*)", p.stdout)
        check(m is not None, f"{method}: no failure reported: {p.stdout[-400:]} {p.stderr[-800:]}")
        seconds, message = float(m.group(1)), m.group(2)
        print(f"{method}: failed after {seconds:.2f} s: {message}")
        # torch 2.x's TCPStore gives up itself at its timeout ("1/2 clients joined"), before the
        # backend is made; 1.13's waits and lets the backend name the missing rank.
        check("missing: 1" in message or (method == "env://" and "1/2 clients joined" in message),
              f"{method}: the missing rank is not named: {message}")
        check(RENDEZVOUS_TIMEOUT_S - 0.1 <= seconds <= RENDEZVOUS_TIMEOUT_S + RENDEZVOUS_MARGIN_S,
              f"{method}: a {RENDEZVOUS_TIMEOUT_S} s timeout ended after {seconds:.2f} s")


MONITORED = """
import datetime, os, sys, time, torch, torch.distributed as dist, nano_torch
dist.init_process_group(sys.argv[1], timeout=datetime.timedelta(seconds=30))
dist.all_reduce(torch.ones(8))  # something issued before: the barrier is ordered after it
if dist.get_rank() == 1:
    time.sleep(4)
start = time.monotonic()
try:
    if sys.argv[2] == "dist":  # torch's function (nano_torch lets it take a nano group)
        dist.monitored_barrier(timeout=datetime.timedelta(seconds=1))
    else:  # the process group's method
        dist.distributed_c10d._get_default_group().monitored_barrier(datetime.timedelta(seconds=1))
    print(f"RETURNED {time.monotonic() - start:.2f}", flush=True)
except RuntimeError as e:
    print(f"RAISED {time.monotonic() - start:.2f} {str(e).splitlines()[0]}", flush=True)
os._exit(0)  # the group's peers failed its barrier: nothing more to do with it
"""
MONITORED_MARGIN_S = 1.5  # over the 1 s timeout; Gloo itself takes about 1.0 s here


def monitored_barrier(tmp):
    program = os.path.join(tmp, "monitored.py")
    with open(program, "w") as f:
        f.write(MONITORED)
    for backend in ("gloo", "nano"):
        for how in ("group", "dist"):
            results = ranks.finish(ranks.start(2, [program, backend, how], PYDIR), 60)
            m = re.search(r"(RAISED|RETURNED) ([0-9.]+) ?(.*)", results[0].out)
            check(m is not None, f"{backend}, {how}: rank 0 said nothing: {describe(results)}")
            print(f"{backend}, {how}: rank 0 {m.group(1).lower()} after {m.group(2)} s: {m.group(3)}")
            check(m.group(1) == "RAISED" and float(m.group(2)) <= 1 + MONITORED_MARGIN_S,
                  f"{backend}, {how}: a 1 s monitored barrier with rank 1 4 s late: {m.group(0)}")
            check(re.search(r"\b1\b", m.group(3)), f"{backend}, {how}: the late rank 1 is not named: {m.group(3)}")


# nano-run's line that names the leaver beside the root cause.
NAMED = (r"nano-run: rank {0} {1} after its collective #\d+ while rank {2} waited in all_reduce\(float32\[4\], SUM\) "
         r"#\d+: rank {0} left early, or rank {2} called one collective more")


def leaver():
    p = under_nano_run([os.path.join(HERE, "mismatch_check.py"), "early_exit"])
    first, block = root_cause(p)
    print(f"early_exit: exit {p.returncode}; {first or p.stderr.strip()[-300:]}")
    check(p.returncode != 0 and "VALUE" not in p.stdout, f"early_exit: exit {p.returncode}: {p.stdout[-400:]}")
    check(re.search(LEFT.format(1), block), f"early_exit: rank 1's early exit is not named:\n{p.stderr[-1500:]}")
    check(re.search(NAMED.format(1, "exited with code 0", 0), block),
          f"early_exit: nano-run does not name rank 1 as leaving early:\n{p.stderr[-1500:]}")
    p = under_nano_run([os.path.join(HERE, "mismatch_check.py"), "extra"])
    first, block = root_cause(p)
    print(f"extra: exit {p.returncode}; {first or p.stderr.strip()[-300:]}")
    check(p.returncode != 0, f"extra: exit 0: {p.stdout[-400:]}")
    check(first.startswith("nano-run: root cause: rank 1 ") and re.search(LEFT.format(0), block),
          f"extra: rank 1's extra collective is not the root cause, or rank 0 is not named as done:\n{p.stderr[-1500:]}")
    check(re.search(NAMED.format(0, "exited with code 0", 1), block),
          f"extra: nano-run does not say which rank ended first:\n{p.stderr[-1500:]}")


def main():
    before = ranks.nano_shm_entries()
    tmp = tempfile.mkdtemp(prefix="nano-torch-backend-")
    try:
        if CASE == "collectives_2":
            collectives(2, {}, True)
        elif CASE == "collectives_3":
            collectives(3, {}, True)
        elif CASE == "collectives_chunked":
            collectives(2, {"NANO_SHM_BYTES": "4096"}, True)
        elif CASE == "collectives_gloo_path":
            collectives(2, {"NANO_SHM_BYTES": "0"}, False)
        elif CASE == "monitored_barrier":
            monitored_barrier(tmp)
        elif CASE == "ddp_bit_identical":
            train("nano-run", "nano", 2, os.path.join(tmp, "nano.pt"))
            train("nano-run", "gloo", 2, os.path.join(tmp, "gloo.pt"))
            weights_compare(os.path.join(tmp, "nano.pt"), os.path.join(tmp, "gloo.pt"), exact=True)
        elif CASE == "ddp_join":
            # Uneven shards under DDP's join(): the joined rank shadows its peers' collectives
            # (the same signatures), so nano trains as Gloo does.
            train("nano-run", "nano", 2, os.path.join(tmp, "nano.pt"), uneven=True)
            train("nano-run", "gloo", 2, os.path.join(tmp, "gloo.pt"), uneven=True)
            weights_compare(os.path.join(tmp, "nano.pt"), os.path.join(tmp, "gloo.pt"), exact=False)
        elif CASE == "ddp_3_4_ranks":
            for n in (3, 4):
                # Sums of 3 or 4 in another order than Gloo's: last-bit differences, which 6 steps
                # of momentum SGD through ReLUs and max-pools grow to ~1e-4 (torch 2.6) at most.
                train("ranks", "nano", n, os.path.join(tmp, f"nano{n}.pt"), steps=6)
                train("ranks", "gloo", n, os.path.join(tmp, f"gloo{n}.pt"), steps=6)
                weights_compare(os.path.join(tmp, f"nano{n}.pt"), os.path.join(tmp, f"gloo{n}.pt"), exact=False,
                                atol=5e-4)
        elif CASE == "ddp_comm_hooks":
            # torch's own hooks on the futures. fp16 compression against Gloo. PowerSGD (which
            # waits for a second all-reduce inside the first one's callback) through shared memory
            # against the same on nano's inner Gloo group (stock Gloo itself aborts on it with torch
            # 1.13: "op.preamble.length <= op.nbytes", its two threads taking the callbacks'
            # collectives out of order). (torch's bf16_compress_hook is refused by DDP itself
            # without CUDA and NCCL.)
            train("ranks", "nano", 2, os.path.join(tmp, "nano-fp16.pt"), hook="fp16")
            train("ranks", "gloo", 2, os.path.join(tmp, "gloo-fp16.pt"), hook="fp16")
            weights_compare(os.path.join(tmp, "nano-fp16.pt"), os.path.join(tmp, "gloo-fp16.pt"), exact=False)
            train("ranks", "nano", 2, os.path.join(tmp, "shm-powersgd.pt"), hook="powersgd")
            train("ranks", "nano", 2, os.path.join(tmp, "tcp-powersgd.pt"), hook="powersgd", env={"NANO_SHM_BYTES": "0"})
            weights_compare(os.path.join(tmp, "shm-powersgd.pt"), os.path.join(tmp, "tcp-powersgd.pt"), exact=False)
        elif CASE in ("fault_kill", "fault_stop", "fault_absent"):
            fault(CASE[len("fault_"):])
        elif CASE == "nano_run_finds_module":
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            prog = ("import datetime, torch.distributed as dist, nano_torch; "
                    "dist.init_process_group('nano', timeout=datetime.timedelta(seconds=30)); "
                    "print('module', nano_torch.__file__, 'shm', nano_torch.uses_shared_memory())")
            p = subprocess.run([NANO_RUN, "-n", "2", "--backend", "subprocess", ranks.PYTHON, "-c", prog], env=env,
                               capture_output=True, text=True, timeout=120)
            check(p.returncode == 0, f"nano-run exited {p.returncode}: {p.stderr[-800:]}")
            check(p.stdout.count(f"module {PYDIR}/nano_torch/__init__.py shm True") == 2, p.stdout)
        elif CASE == "mismatch":
            mismatch()
        elif CASE == "rendezvous_bound":
            rendezvous_bound()
        elif CASE == "mismatch_gloo_path":
            # How each operation's signature is made is the shared-memory case's; here only how
            # signatures travel differs: one mismatch of size and one of kind.
            mismatch({"NANO_SHM_BYTES": "0"}, ("sizes", "kinds"))
        elif CASE == "leaver":
            leaver()
        elif CASE == "torchrun":
            return torchrun(tmp)
        elif CASE == "standalone_sources":
            standalone_sources()
        else:
            raise Failure(f"unknown case {CASE}")
        left = sorted(set(ranks.nano_shm_entries()) - set(before))
        check(not left, f"left in /dev/shm: {left}")
    except Failure as e:
        print(f"FAIL: {CASE}: {e}")
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"PASS: {CASE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
