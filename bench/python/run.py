#!/usr/bin/python3
"""Runs the side-by-side throughput measurements of scripts/bench.sh and writes raw.json.

For each model (LeNet on Fashion-MNIST, ResNet-18 on 3x32x32) at a fixed batch per rank:
  base        1 process x 1 thread, OMP_NUM_THREADS=1, taskset to one core (the per-core base)
  all         1 process x every core, started plainly with OMP_NUM_THREADS = physical cores
  nano-base   nano-run, one rank on the base's core (nano's allocator and binding): the per-core
              base that isolates scaling from the recipe's own gain
  independent nano-run -n N (N = the largest k) with every rank told it is a world of one: the
              same processes, binding and allocator with no communication; their summed rate is
              what the machine itself allows N ranks (shared caches, memory bandwidth, noisy cores).
              With --step-times each rank also lists its step times, from which the synchronous
              ceiling follows: had the ranks waited for each other at every step but exchanged
              nothing, step i would have taken the longest of their step i's
  nano-mpi / nano-subprocess   nano-run -n k --backend ... for each k
  pytorch     stock PyTorch DDP (bench/python/pytorch_ddp.py, Gloo), k ranks pinned with taskset
              to the same CPU lists nano-run's plan gives, OMP_NUM_THREADS = its cores
  pytorch-base  the same Python program as one plain process (no DDP) on the base's core with
              OMP_NUM_THREADS=1: PyTorch's own per-core base, for PyTorch's own scaling efficiency
Repeats are interleaved (every configuration once, then again) so slow drift in the machine's
load hits all configurations alike; the report takes the median.
Every program prints `nano-result: {json}` from rank 0; images_per_sec is the global rate over
the timed steps (warm-up excluded).
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "common"))
from free_port import free_port  # noqa: E402  (the scripts' and tests' one helper)
PYTHON = "/usr/bin/python3"  # Debian's python3 carries python3-torch
RESULT_RE = re.compile(r"nano-result:\s*(\{.*\})")
# Launcher variables that would make a "plain" run join some outer world.
RANK_VARS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR",
             "MASTER_PORT", "NANO_CPUS", "OMP_NUM_THREADS", "LD_PRELOAD", "MALLOC_CONF"]


def log(msg):
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items()
           if k not in RANK_VARS and not k.startswith("OMPI_COMM_WORLD") and not k.startswith("PMIX_")}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def parse_result(text):
    """The nano-result JSON object printed by rank 0, or None."""
    found = None
    for line in text.splitlines():
        m = RESULT_RE.search(line)
        if m:
            try:
                found = json.loads(m.group(1))
            except json.JSONDecodeError:
                pass
    return found


def run_group(cmds, timeout):
    """Starts every (argv, env) in `cmds` at once, each in its own session, waits for all.
    Returns (worst exit code, combined output). On timeout every process group is killed."""
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True, text=True, errors="replace") for argv, env in cmds]
    deadline = time.monotonic() + timeout
    outputs, code = [], 0
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            for q in procs:
                try:
                    os.killpg(q.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            out, _ = p.communicate()
            code = code or 124
        outputs.append(out)
        code = code or p.returncode
    return code, "\n".join(outputs)


class Bench:
    def __init__(self, a):
        self.a = a
        self.bin = os.path.join(a.build, "bin")
        self.nano_run = os.path.join(self.bin, "nano-run")
        self.plans = {}
        self.lenet_extra = []
        lenet_help = self.help_text(a.lenet_program)
        if a.lenet_test_limit > 0 and "--test-limit" in lenet_help:
            self.lenet_extra = ["--test-limit", str(a.lenet_test_limit)]  # evaluation is untimed; saves wall time
        # Programs that can list their step times (older builds cannot; the ceiling is then left out).
        self.step_times = {"lenet": "--step-times" in lenet_help,
                           "resnet18": "--step-times" in self.help_text("resnet18_cifar")}

    def help_text(self, program):
        try:
            return subprocess.run([os.path.join(self.bin, program), "--help"], capture_output=True, text=True,
                                  timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired):
            return ""

    def plan(self, k):
        """CPU lists nano-run's planner gives k ranks on this machine (the PyTorch ranks get the same)."""
        if k not in self.plans:
            out = subprocess.run([self.nano_run, "-n", str(k), "--backend", "subprocess", "--dry-run", "--json",
                                  "/bin/true"], check=True, capture_output=True, text=True).stdout
            self.plans[k] = [r["cpus"] for r in json.loads(out)["ranks"]]
        return self.plans[k]

    def program(self, model):
        a = self.a
        if model == "lenet":
            return [os.path.join(self.bin, a.lenet_program), "--batch-size", str(a.batch), "--epochs", "1",
                    "--max-steps-per-epoch", str(a.lenet_steps)] + self.lenet_extra
        return [os.path.join(self.bin, "resnet18_cifar"), "--batch-size", str(a.batch), "--steps", str(a.resnet_steps)]

    def warmup_and_timed(self, model):
        """The C++ examples' split: fashion_mnist_nano's --max-steps-per-epoch S counts its
        min(3, S/2) warm-up steps; resnet18_cifar's --steps S are timed after 3 warm-up steps."""
        if model == "lenet":
            warmup = min(3, self.a.lenet_steps // 2)
            return warmup, self.a.lenet_steps - warmup
        return 3, self.a.resnet_steps

    def commands(self, model, cfg):
        kind, k = cfg["kind"], cfg["k"]
        if kind == "base":
            cpu = self.plan(1)[0][0]
            return [(["taskset", "-c", str(cpu)] + self.program(model), clean_env(OMP_NUM_THREADS=1))]
        if kind == "all":
            # OMP_NUM_THREADS explicit: this libtorch may default to fewer threads than cores (Debian's
            # 1.13 picks 1 on some virtual machines), and this row means "every core in one process".
            return [(self.program(model), clean_env(OMP_NUM_THREADS=self.a.cores))]
        if kind == "nano-base":
            cpu = self.plan(1)[0][0]
            argv = [self.nano_run, "--cpu-for-each-process", str(cpu), "--backend", "subprocess", "--"] + \
                self.program(model)
            return [(argv, clean_env())]
        if kind == "independent":
            argv = [self.nano_run, "-n", str(k), "--backend", "subprocess", "--", "env", "RANK=0", "LOCAL_RANK=0",
                    "WORLD_SIZE=1", "LOCAL_WORLD_SIZE=1"] + self.program(model) + \
                (["--step-times"] if self.step_times[model] else [])
            return [(argv, clean_env())]
        if kind.startswith("nano-"):
            backend = kind[len("nano-"):]
            argv = [self.nano_run, "-n", str(k), "--backend", backend, "--output-ranks", "0", "--"] + self.program(model)
            return [(argv, clean_env(OMPI_ALLOW_RUN_AS_ROOT=1, OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1))]
        warmup, timed = self.warmup_and_timed(model)
        pytorch_args = [PYTHON, os.path.join(HERE, "pytorch_ddp.py"), model, "--steps", str(timed), "--warmup",
                        str(warmup), "--batch-size", str(self.a.batch), "--data-dir", self.a.data_dir]
        if kind == "pytorch-base":
            cpu = self.plan(1)[0][0]
            return [(["taskset", "-c", str(cpu)] + pytorch_args + ["--single"], clean_env(OMP_NUM_THREADS=1))]
        # Stock PyTorch: our own minimal torchrun-style launcher.
        port = free_port()
        cmds = []
        for rank, cpus in enumerate(self.plan(k)):
            env = clean_env(RANK=rank, LOCAL_RANK=rank, WORLD_SIZE=k, LOCAL_WORLD_SIZE=k, MASTER_ADDR="127.0.0.1",
                            MASTER_PORT=port, OMP_NUM_THREADS=len(cpus))
            cmds.append((["taskset", "-c", ",".join(map(str, cpus))] + pytorch_args, env))
        return cmds

    def measure(self, model, cfg):
        cmds = self.commands(model, cfg)
        t0 = time.monotonic()
        code, out = run_group(cmds, self.a.timeout)
        wall = time.monotonic() - t0
        result = parse_result(out)
        if cfg["kind"] == "independent" and code == 0:
            # Every rank prints its own result: the machine's rate is their sum.
            try:
                ranks = [json.loads(m.group(1)) for m in RESULT_RE.finditer(out)]
            except json.JSONDecodeError:  # e.g. a result line longer than nano-run relays whole
                ranks = []
            if len(ranks) == cfg["k"]:
                result = {"images_per_sec": round(sum(r["images_per_sec"] for r in ranks), 1),
                          "ranks": [r["images_per_sec"] for r in ranks]}
                series = [r["step_ms"] for r in ranks if r.get("step_ms")]
                if len(series) == cfg["k"]:
                    result.update(synchronous_ceiling(series, self.a.batch))
            else:
                result = None
        rec = {"model": model, **cfg, "exit_code": code, "wall_s": round(wall, 2),
               "command": " ".join(cmds[0][0]) + (f"  (x{len(cmds)} ranks)" if len(cmds) > 1 else "")}
        if code == 0 and result is not None:
            rec["images_per_sec"] = result["images_per_sec"]
            rec["result"] = result
        else:
            rec["error"] = "\n".join(out.strip().splitlines()[-8:])
            if code == 0:
                rec["error"] += "\n(exit 0 but no nano-result line)"
        return rec


def synchronous_ceiling(series, batch):
    """From independent ranks' step times (ms, one list per rank, `batch` images per step): the
    rate of the same ranks had every step waited for the slowest of them (step i takes the
    longest step i) with a free exchange, and each rank's median step. Pairing by index treats
    the ranks' hiccups as independent: one that hit every core at once, at different step
    indexes of the ranks, is counted up to once per rank."""
    steps = min(len(s) for s in series)
    slowest_ms = sum(max(s[i] for s in series) for i in range(steps))
    medians = [round(sorted(s)[len(s) // 2], 3) for s in series]
    return {"sync_ceiling_images_per_sec": round(len(series) * batch * steps / (slowest_ms / 1000), 1),
            "median_step_ms": medians}


def configs(ks, kinds):
    out = [{"kind": "base", "k": 1}, {"kind": "nano-base", "k": 1}, {"kind": "all", "k": 1}]
    if "pytorch" in kinds:
        out.append({"kind": "pytorch-base", "k": 1})
    if max(ks) > 1:
        out.append({"kind": "independent", "k": max(ks)})
    for k in ks:
        for kind in kinds:
            out.append({"kind": kind, "k": k})
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--out", required=True, help="raw.json to write")
    p.add_argument("--cores", type=int, required=True, help="physical cores")
    p.add_argument("--ks", required=True, help="comma-separated rank counts")
    p.add_argument("--models", default="lenet,resnet18")
    p.add_argument("--kinds", default="nano-mpi,nano-subprocess,pytorch")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lenet-steps", type=int, required=True)
    p.add_argument("--resnet-steps", type=int, required=True)
    p.add_argument("--lenet-repeats", type=int, default=3)
    p.add_argument("--resnet-repeats", type=int, default=1)
    p.add_argument("--lenet-test-limit", type=int, default=2000, help="test images the LeNet program evaluates")
    p.add_argument("--lenet-program", default="fashion_mnist_nano")
    p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--timeout", type=float, default=900)
    a = p.parse_args()
    bench = Bench(a)
    ks = [int(k) for k in a.ks.split(",")]
    records = []
    for model in a.models.split(","):
        repeats = a.lenet_repeats if model == "lenet" else a.resnet_repeats
        for rep in range(repeats):
            for cfg in configs(ks, a.kinds.split(",")):
                rec = bench.measure(model, cfg)
                rec["repeat"] = rep
                records.append(rec)
                rate = f"{rec['images_per_sec']:.1f} img/s" if "images_per_sec" in rec else \
                    f"FAILED (exit {rec['exit_code']}): {rec['error'].splitlines()[-1] if rec['error'] else ''}"
                log(f"{model:8s} {cfg['kind']:16s} k={cfg['k']:<3d} repeat {rep + 1}/{repeats}: {rate}"
                    f" ({rec['wall_s']:.1f} s)")
    with open(a.out, "w") as f:
        json.dump({"plans": {str(k): v for k, v in bench.plans.items()}, "runs": records}, f, indent=1)
    return 0 if all("images_per_sec" in r for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
