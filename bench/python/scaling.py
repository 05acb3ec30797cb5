#!/usr/bin/env python3
"""Scaling of stock PyTorch DDP over the cores of one host: Gloo against the `nano` backend.

Needs only a Python with torch, a C++ compiler and taskset (no nano build, no Debian packages),
so that it runs on a big machine that has nothing of nano's but this checkout. Every run is
bench/python/pytorch_ddp.py (LeNet on Fashion-MNIST, ResNet-18 on 3x32x32, batch per rank
fixed), its ranks started with torchrun's environment and pinned with taskset:
  all     k ranks share every CPU: rank r gets the r-th of k equal, contiguous slices of the CPUs
          (ordered by package and core, so a slice is whole cores) and as many threads; k = 1 is
          one plain process on every CPU (no process group): what most users run today
  percore k ranks on one core each, one thread (LeNet only): scaling efficiency against the
          same program as one plain process on one core
for each k on `gloo` and on `nano` (import nano_torch; init_process_group("nano")), the two in
turn, their order alternating from repeat to repeat. Then the all-reduce itself at the largest
k (bench/python/torch_allreduce.py), after the first model. With --timeline every nano run
records nano's timeline (NANO_TIMELINE, runtime/timeline/recorder.h) and a last table tells, per k, the
step time, the time the all-reduces were in flight per step, the slowest rank against the median
one, and how many threads computed in each rank: which of them grows with k. Runs stop being started once
--budget seconds are spent, so a machine lent for minutes returns what it measured; the tables
are printed after every repeat and at the end. Every run's record goes to --json.
Usage: scaling.py [--ranks 1,2,4,8,16] [--repeats 2] [--budget SECONDS] [--nano-torch DIR] [--timeline]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "common"))
sys.path.insert(0, HERE)
from free_port import free_port  # noqa: E402
from run import clean_env, parse_result, run_group  # noqa: E402  (bench/python/run.py)


def log(msg):
    print(f"scaling: {msg}", file=sys.stderr, flush=True)


def topology():
    """This process's CPUs as (package, core, CPU), sorted: a core's CPUs next to each other."""
    keyed = []
    for cpu in sorted(os.sched_getaffinity(0)):
        topo = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        try:
            with open(f"{topo}/physical_package_id") as f, open(f"{topo}/core_id") as g:
                keyed.append((int(f.read()), int(g.read()), cpu))
        except OSError:
            keyed.append((0, cpu, cpu))
    return sorted(keyed)


def slices(cpus, k):
    """k equal contiguous slices of `cpus` (k must divide their number)."""
    n = len(cpus) // k
    return [cpus[i * n:(i + 1) * n] for i in range(k)]


def libuv_setting(python):
    """USE_LIBUV for the ranks: torch >= 2.4 hosts its store on libuv by default, which a build
    without libuv (Debian 13's 2.6) refuses; "1" where this torch has it, else "0"."""
    probe = ("import torch.distributed as d\n"
             "try:\n d.TCPStore('127.0.0.1', 0, 1, True, use_libuv=True); print(1)\n"
             "except Exception:\n print(0)\n")
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True).stdout.strip()
    return out if out in ("0", "1") else "0"


def timeline_summary(folder, steps):
    """Where a nano run's time went, from its ranks' timeline records (runtime/timeline/recorder.h): the
    median rank's median step (ms; torch 2's optimizer hooks mark a stock program's steps, 1.13
    has none), the slowest rank's median step over it, the all-reduces' time in flight per step
    (ms, issued to done: overlapped with backward or not), the threads that computed per rank."""
    ranks = []
    for name in sorted(os.listdir(folder)):
        step_ms, in_flight, threads = [], 0.0, None
        with open(os.path.join(folder, name)) as f:
            for line in f:
                w = line.split()
                if w[:1] == ["S"] and len(w) >= 4:
                    step_ms.append((int(w[3]) - int(w[2])) / 1e6)
                elif w[:1] == ["C"] and len(w) >= 5 and w[4].startswith("all_reduce"):
                    in_flight += (int(w[2]) - int(w[1])) / 1e6
                elif w[:1] == ["T"] and len(w) >= 2:
                    threads = int(w[1])
        ranks.append({"step_ms": statistics.median(step_ms[2:]) if len(step_ms) > 2 else None,
                      "allreduce_ms": in_flight / steps, "threads": threads})
    if not ranks:
        return None
    medians = [r["step_ms"] for r in ranks if r["step_ms"]]
    mid = statistics.median(medians) if medians else None
    return {"step_ms": round(mid, 2) if mid else None,
            "slowest": round(max(medians) / mid, 3) if mid else None,
            "allreduce_ms": round(statistics.median(r["allreduce_ms"] for r in ranks), 2),
            "threads": sorted({r["threads"] for r in ranks if r["threads"] is not None})}


class Scaling:
    def __init__(self, a):
        self.a = a
        self.t0 = time.monotonic()
        keyed = topology()
        self.cpus = [cpu for _, _, cpu in keyed]
        firsts = {}
        for package, core, cpu in keyed:
            firsts.setdefault((package, core), cpu)
        self.core_firsts = list(firsts.values())  # one CPU of each core, in core order
        self.cores = len(self.core_firsts)
        self.records = []
        self.libuv = libuv_setting(a.python)
        self.wall = {}  # (model, layout, k, backend) -> seconds of the last such run

    def left(self):
        return self.a.budget - (time.monotonic() - self.t0)

    def program(self, model, backend):
        steps, warmup = (self.a.lenet_steps, 3) if model == "lenet" else (self.a.resnet_steps, 2)
        argv = [self.a.python, os.path.join(HERE, "pytorch_ddp.py"), model, "--steps", str(steps),
                "--warmup", str(warmup), "--batch-size", str(self.a.batch), "--data-dir", self.a.data_dir]
        return argv + (["--single"] if backend is None else ["--dist-backend", backend])

    def ranks(self, argv, groups, **extra):
        """One (argv, env) per CPU group: a rank pinned there with torchrun's environment."""
        port = free_port()
        return [(["taskset", "-c", ",".join(map(str, cpus))] + argv,
                 clean_env(RANK=r, LOCAL_RANK=r, WORLD_SIZE=len(groups), LOCAL_WORLD_SIZE=len(groups),
                           MASTER_ADDR="127.0.0.1", MASTER_PORT=port, OMP_NUM_THREADS=len(cpus),
                           USE_LIBUV=self.libuv, **extra))
                for r, cpus in enumerate(groups)]

    def commands(self, model, layout, k, backend):
        groups = slices(self.cpus, k) if layout == "all" else [[c] for c in self.core_firsts[:k]]
        if backend is None:  # one plain process
            cpus = groups[0]
            return [(["taskset", "-c", ",".join(map(str, cpus))] + self.program(model, None),
                     clean_env(OMP_NUM_THREADS=len(cpus)))]
        extra = {"PYTHONPATH": self.a.nano_torch} if backend == "nano" else {}
        if backend == "nano" and self.a.timeline:
            self.timeline = tempfile.mkdtemp(prefix="nano-scaling-timeline.")
            extra["NANO_TIMELINE"] = self.timeline
        return self.ranks(self.program(model, backend), groups, **extra)

    def measure(self, model, layout, k, backend, repeat):
        key = (model, layout, k, backend)
        expected = self.wall.get(key, 0)
        if self.left() < max(expected * 1.2, 5):
            log(f"skipped {key}: {self.left():.0f} s of the budget left")
            return
        t = time.monotonic()
        self.timeline = None
        code, out = run_group(self.commands(model, layout, k, backend), self.a.timeout)
        where = None
        if self.timeline:
            steps = (self.a.lenet_steps + 3) if model == "lenet" else (self.a.resnet_steps + 2)
            where = timeline_summary(self.timeline, steps)
            shutil.rmtree(self.timeline, ignore_errors=True)
        self.wall[key] = time.monotonic() - t
        result = parse_result(out)
        rec = {"model": model, "layout": layout, "k": k, "backend": backend or "single", "repeat": repeat,
               "exit_code": code, "wall_s": round(self.wall[key], 1)}
        if code == 0 and result:
            rec["images_per_sec"] = round(result["images_per_sec"], 1)
            rec["threads"] = result["threads"]
            if where:
                rec["timeline"] = where
        else:
            rec["error"] = "\n".join(out.strip().splitlines()[-6:])
            log(f"{key} failed ({code}): {rec['error']}")
        self.records.append(rec)
        log(f"{model} {layout} k={k} {backend or 'single'}: {rec.get('images_per_sec', 'FAILED')} img/s "
            f"({rec['wall_s']} s; {self.left():.0f} s left)")
        self.save()

    def save(self):
        if self.a.json:
            with open(self.a.json, "w") as f:
                json.dump({"cpus": self.cpus, "cores": self.cores, "runs": self.records}, f, indent=1)

    def one_layout(self, layout, models, repeat):
        order = ["gloo", "nano"] if repeat % 2 == 0 else ["nano", "gloo"]
        if not self.a.nano_torch:
            order = ["gloo"]
        ranks = self.a.ranks if layout == "all" else [k for k in self.a.ranks if k <= self.cores]
        for model in models:
            for k in ranks:
                for backend in ([None] if k == 1 else order):
                    self.measure(model, layout, k, backend, repeat)

    def allreduce(self):
        k = max(self.a.ranks)
        if not self.a.nano_torch or k < 2 or self.left() < 30:
            return
        cmds = self.ranks([self.a.python, os.path.join(HERE, "torch_allreduce.py"), "--sizes", self.a.allreduce_mb,
                           "--reps", "5"], slices(self.cpus, k), PYTHONPATH=self.a.nano_torch)
        code, out = run_group(cmds, self.a.timeout)
        lines = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
        self.records.append({"allreduce_ranks": k, "exit_code": code, "results": lines})
        self.save()
        print(f"\nall-reduce of float32 over {k} ranks, ms: median min max of 5 (exit {code})")
        print("\n".join(lines) if lines else "\n".join(out.strip().splitlines()[-6:]), flush=True)

    def table(self):
        def rates(model, layout, k, backend):
            return [r["images_per_sec"] for r in self.records if r.get("model") == model and r["layout"] == layout
                    and r["k"] == k and r["backend"] == backend and "images_per_sec" in r]

        def cell(v):
            return f"{statistics.median(v):.1f} ({min(v):.0f}-{max(v):.0f})" if v else "-"

        for model in self.a.models:
            for layout in (["all", "percore"] if model == "lenet" and self.a.percore else ["all"]):
                base = rates(model, layout, 1, "single")
                b = statistics.median(base) if base else None
                what = (f"k ranks x {len(self.cpus)}/k CPUs" if layout == "all" else "k ranks x 1 core")
                print(f"\n{model}, {what}, batch {self.a.batch}/rank, img/s: median (min-max); "
                      f"k=1 is one plain process")
                print(f"{'k':>3} {'thr':>4} {'gloo':>22} {'nano':>22} {'nano/gloo':>9} {'gloo/k=1':>8} "
                      f"{'nano/k=1':>8}" + ("  eff gloo  eff nano" if layout == "percore" else ""))
                for k in sorted(self.a.ranks):
                    if layout == "percore" and k > self.cores:
                        continue
                    thr = len(self.cpus) // k if layout == "all" else 1
                    if k == 1:
                        print(f"{k:>3} {thr:>4} {cell(base):>22}")
                        continue
                    g, n = rates(model, layout, k, "gloo"), rates(model, layout, k, "nano")
                    gm = statistics.median(g) if g else None
                    nm = statistics.median(n) if n else None
                    ratio = f"{nm / gm:.3f}" if gm and nm else "-"
                    rel = [f"{x / b:.2f}" if x and b else "-" for x in (gm, nm)]
                    eff = [f"{x / (k * b):.2f}" if x and b else "-" for x in (gm, nm)]
                    print(f"{k:>3} {thr:>4} {cell(g):>22} {cell(n):>22} {ratio:>9} {rel[0]:>8} {rel[1]:>8}"
                          + (f"  {eff[0]:>8} {eff[1]:>9}" if layout == "percore" else ""))
        if self.a.timeline:
            self.timeline_table()
        sys.stdout.flush()

    def timeline_table(self):
        print("\nnano's timeline of the nano runs (median over repeats): step ms (median rank's; from the "
              "throughput on torch 1.13, whose optimizers have no step hooks), slowest rank's step / median, all-reduce ms in flight per step (overlapped with backward or not) and its "
              "share of the step, threads computing per rank")
        print(f"{'model':>9} {'layout':>8} {'k':>3} {'step ms':>8} {'slowest':>8} {'allred ms':>9} {'share':>6} "
              f"{'threads':>8}")
        for model in self.a.models:
            for layout in ("all", "percore"):
                for k in sorted(self.a.ranks):
                    runs = [r for r in self.records if r.get("model") == model and r["layout"] == layout
                            and r["k"] == k and r["backend"] == "nano" and r.get("timeline")]
                    if not runs:
                        continue
                    got = [r["timeline"] for r in runs]
                    # The timed steps' time from the throughput where no optimizer hook marked steps.
                    for r in runs:
                        if r["timeline"]["step_ms"] is None:
                            r["timeline"]["step_ms"] = round(self.a.batch * k * 1000 / r["images_per_sec"], 2)

                    def mid(key):
                        values = [g[key] for g in got if g[key] is not None]
                        return statistics.median(values) if values else None
                    step, slowest, allreduce = mid("step_ms"), mid("slowest"), mid("allreduce_ms")
                    share = f"{allreduce / step:.0%}" if step and allreduce is not None else "-"
                    threads = ",".join(str(t) for t in sorted({t for g in got for t in g["threads"]})) or "-"
                    print(f"{model:>9} {layout:>8} {k:>3} {step or '-':>8} {slowest or '-':>8} "
                          f"{allreduce if allreduce is not None else '-':>9} {share:>6} {threads:>8}")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--python", default=sys.executable, help="the Python with torch that runs the ranks")
    p.add_argument("--ranks", default=None,
                   help="comma-separated k, run in this order (default 1,2,4,... up to the CPUs; 1 is required)")
    p.add_argument("--models", default="lenet,resnet18")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--budget", type=float, default=3600, help="no run is started after this many seconds")
    p.add_argument("--timeout", type=float, default=180, help="seconds one run may take")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lenet-steps", type=int, default=50)
    p.add_argument("--resnet-steps", type=int, default=3)
    p.add_argument("--allreduce-mb", default="4,44")
    p.add_argument("--no-percore", dest="percore", action="store_false")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--nano-torch", default="", help="folder holding nano_torch (empty: Gloo only)")
    p.add_argument("--json", default="")
    p.add_argument("--timeline", action="store_true",
                   help="record nano's timeline in every nano run and tell where the step's time goes at each k")
    a = p.parse_args()
    a.models = a.models.split(",")
    s = Scaling(a)
    n = len(s.cpus)
    try:
        a.ranks = [int(k) for k in a.ranks.split(",")] if a.ranks else [k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= n]
    except ValueError:
        p.error(f"--ranks {a.ranks!r}: not a comma-separated list of integers")  # exit 2
    bad = [k for k in a.ranks if k < 1 or n % k]
    if bad or 1 not in a.ranks:
        p.error(f"--ranks {a.ranks}: each must divide the {n} CPUs, and 1 must be among them")  # exit 2
    print(f"scaling: {n} CPUs on {s.cores} cores, ranks {a.ranks}, USE_LIBUV={s.libuv}, "
          f"nano backend {'from ' + a.nano_torch if a.nano_torch else 'not built: Gloo only'}", flush=True)
    for repeat in range(a.repeats):  # what matters most first: a short budget still returns it
        s.one_layout("all", a.models[:1], repeat)
        if repeat == 0:
            s.table()
            s.allreduce()
        s.one_layout("all", a.models[1:], repeat)
        if a.percore and "lenet" in a.models:
            s.one_layout("percore", ["lenet"], repeat)
        s.table()
    s.save()


if __name__ == "__main__":
    main()
