#!/usr/bin/python3
"""What the Python API (nano_torch.TorchNano, @nano) costs, side by side in one run:

1. img/s of the seed's training loop (pytorch_ddp.py's models, optimizers, batch and timing: LeNet
   on Fashion-MNIST, ResNet-18 on 3x32x32) as one process on all cores, as TorchNano(num_processes=2),
   as @nano(num_processes=2), and as the stock DDP script under `nano-run -n 2` on the nano backend.
   Goal: the API >= 0.97x the stock script in every model. What DDP's find_unused_parameters=True
   (BigDL-Nano's, the API's default) costs: TorchNano with find_unused_parameters=False, and on
   the model with an unused layer beside it (which needs True).
2. Launch overhead: a job that only meets its peers (init, barrier), started by `nano-run -n 2`
   and by an @nano call from a running caller (torch imported); and, in the training runs above,
   the time from the call to rank 0's first step and from its last step to the call's return.
   Goal: the call adds at most 1 s over nano-run.
3. The whole job's peak memory (this machine's used memory, sampled every 20 ms, over the
   baseline) with an in-memory TensorDataset of GB gigabytes at 1, 2 and 4 ranks, every rank
   reading its whole shard once, and what the dataset adds to it (the same job with a 1 MiB
   dataset subtracted). Goal: the dataset adds itself once, at any number of ranks (BigDL-Nano's
   ranks each held a copy). num_processes=1 trains in the caller: no rank process at all.
Every row is repeated RUNS times (configurations interleaved); the table gives median (min-max).

Usage: python_api.py BUILD_DIR [--runs 2] [--lenet-steps 60] [--resnet-steps 6] [--gb 1]
       python_api.py --role {lite,decorator,single,meet,memory} ...   (one measurement; internal)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def loop(model, optimizer, loader, warmup, steps, barrier, world):
    """pytorch_ddp.py's timed loop: warm-up steps, then `steps` timed ones; rank 0's figures."""
    import torch.nn.functional as F
    marks = {"first_step": time.time()}
    t0, done, total = None, 0, warmup + steps
    model.train()
    for step, (x, y) in enumerate(loader):
        if step == warmup:
            barrier()
            t0 = time.perf_counter()
        if step == total:
            break
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        loss.item()
        if step >= warmup:
            done += x.shape[0]
    barrier()
    seconds = time.perf_counter() - t0
    marks["last_step"] = time.time()
    return dict(marks, images_per_sec=done * world / seconds)


def setup_of(model_name, world, steps, warmup):
    import torch
    from torch.utils.data import DataLoader
    import pytorch_ddp as p
    torch.manual_seed(0)
    if model_name == "lenet":
        model = p.LeNet()
        return model, torch.optim.Adam(model.parameters(), lr=1e-3), DataLoader(
            p.fashion_mnist_train(p.FASHION_MNIST_DIR), batch_size=64, shuffle=True)
    model = p.ResNet18()
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), DataLoader(
        p.SyntheticCifar((steps + warmup) * 64 * world), batch_size=64, shuffle=True)


def role(a):
    import torch
    import torch.distributed as dist
    from nano_torch import TorchNano, nano

    def barrier():
        if dist.is_initialized():
            dist.barrier()

    if a.role == "meet":
        @nano(num_processes=2)
        def meet(model):
            dist.barrier()
        meet(torch.nn.Linear(1, 1))  # the first call imports what the rest do not repeat
        started = time.perf_counter()
        meet(torch.nn.Linear(1, 1))
        print("nano-result: " + json.dumps({"seconds": time.perf_counter() - started}))
        return
    if a.role == "memory":
        from torch.utils.data import DataLoader, TensorDataset
        x = torch.randn(int(a.gb * 2**30) // 4 // 1024, 1024)
        data = TensorDataset(x, torch.zeros(len(x), dtype=torch.long))

        @nano(num_processes=a.ranks, oversubscribe=True, auto_lr=False)
        def read_all(model, loader):
            return sum(float(b.sum()) for b, _ in loader)

        print("READY", flush=True)
        read_all(torch.nn.Linear(1, 1), DataLoader(data, batch_size=4096))
        print("nano-result: {}", flush=True)
        return
    model, optimizer, loader = setup_of(a.model, 1 if a.role == "single" else 2, a.steps, a.warmup)
    started = time.time()
    if a.role == "single":
        got = loop(model, optimizer, loader, a.warmup, a.steps, barrier, 1)
    elif a.role == "decorator":
        @nano(num_processes=2, auto_lr=False)
        def training(model, optimizer, loader):
            return loop(model, optimizer, loader, a.warmup, a.steps, barrier, dist.get_world_size())
        got = training(model, optimizer, loader)
    else:
        if a.spare:  # a 64x64 layer beside the model, unused: DDP needs find_unused_parameters=True for it
            class WithSpare(torch.nn.Module):
                def __init__(self, inner):
                    super().__init__()
                    self.inner, self.spare = inner, torch.nn.Linear(64, 64)

                def forward(self, x):
                    return self.inner(x)

            model = WithSpare(model)
            optimizer = type(optimizer)(model.parameters(), **optimizer.defaults)

        class Lite(TorchNano):
            def train(self):
                m, o, d = self.setup(model, optimizer, loader)
                return loop(m, o, d, a.warmup, a.steps, barrier, self.world_size)
        got = Lite(num_processes=2, auto_lr=False, find_unused_parameters=a.find_unused == 1).train()
    returned = time.time()
    print("nano-result: " + json.dumps({"images_per_sec": got["images_per_sec"],
                                        "to_first_step": got["first_step"] - started,
                                        "after_last_step": returned - got["last_step"]}), flush=True)


def result_of(p):
    lines = [line for line in p.stdout.splitlines() if line.startswith(("nano-result: ", "[rank 0] nano-result: "))]
    if p.returncode != 0 or not lines:
        raise RuntimeError(f"exit {p.returncode}: {p.stderr[-1500:]}")
    return json.loads(lines[-1].split("nano-result: ", 1)[1])


def used_mib():
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, value = line.split(":")
            info[key] = int(value.split()[0])
    return (info["MemTotal"] - info["MemAvailable"]) / 1024


def peak_memory(cmd, env):
    """(baseline MiB, peak MiB over it) of this machine while `cmd` runs."""
    base = statistics.median(used_mib() for _ in range(5))
    peak = [base]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak[0] = max(peak[0], used_mib())
            time.sleep(0.02)

    t = threading.Thread(target=sample)
    t.start()
    out, err = p.communicate(timeout=600)
    stop.set()
    t.join()
    if p.returncode != 0:
        raise RuntimeError(f"memory run exit {p.returncode}: {err[-1500:]}")
    return base, peak[0] - base


def spread(values):
    return f"{statistics.median(values):.4g} ({min(values):.4g}-{max(values):.4g})"


def driver(a):
    build = os.path.abspath(a.build)
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "lib", "nano", "python"), USE_LIBUV="0")
    nano_run = os.path.join(build, "bin", "nano-run")
    me = [sys.executable, os.path.abspath(__file__)]
    results = {}

    def record(key, value):
        results.setdefault(key, []).append(value)
        print(f"  {key}: {value}", file=sys.stderr, flush=True)

    for run in range(a.runs):
        print(f"run {run + 1} of {a.runs}", file=sys.stderr, flush=True)
        for model, steps in (("lenet", a.lenet_steps), ("resnet18", a.resnet_steps)):
            common = ["--model", model, "--steps", str(steps), "--warmup", "3"]
            stock = [nano_run, "-n", "2", sys.executable, os.path.join(HERE, "pytorch_ddp.py"), model,
                     "--steps", str(steps), "--dist-backend", "nano"]
            record((model, "stock DDP, nano-run -n 2"), result_of(subprocess.run(
                stock, env=env, capture_output=True, text=True, timeout=900))["images_per_sec"])
            for name, r, extra in (("TorchNano(num_processes=2)", "lite", []),
                                   ("@nano(num_processes=2)", "decorator", []),
                                   ("TorchNano, find_unused_parameters=False", "lite", ["--find-unused", "0"]),
                                   ("TorchNano, an unused layer beside the model", "lite", ["--spare"])):
                got = result_of(subprocess.run(me + ["--role", r] + common + extra, env=env, capture_output=True,
                                               text=True, timeout=900))
                record((model, name), got["images_per_sec"])
                if not extra:
                    record(("overhead", f"{name}: call to rank 0's first step, s"), got["to_first_step"])
                    record(("overhead", f"{name}: rank 0's last step to return, s"), got["after_last_step"])
            record((model, "one process, all cores"), result_of(subprocess.run(
                me + ["--role", "single"] + common, env=dict(env, OMP_NUM_THREADS=str(os.cpu_count())),
                capture_output=True, text=True, timeout=900))["images_per_sec"])
        started = time.perf_counter()
        subprocess.run([nano_run, "-n", "2", sys.executable, "-c",
                        "import nano_torch, torch.distributed as d; d.init_process_group('nano'); d.barrier()"],
                       env=env, check=True, capture_output=True, timeout=120)
        record(("overhead", "meet: nano-run -n 2 python3 (init, barrier), s"), time.perf_counter() - started)
        record(("overhead", "meet: @nano call from a running caller, s"), result_of(subprocess.run(
            me + ["--role", "meet"], env=env, capture_output=True, text=True, timeout=120))["seconds"])
        for ranks in (1, 2, 4):
            peaks = {}
            for gb in (a.gb, 1 / 1024):
                _, peaks[gb] = peak_memory(me + ["--role", "memory", "--ranks", str(ranks), "--gb", str(gb)], env)
            record(("memory", f"{ranks} ranks: job peak over baseline, MiB"), peaks[a.gb])
            record(("memory", f"{ranks} ranks: what the dataset adds to it, MiB"), peaks[a.gb] - peaks[1 / 1024])

    print(f"\nPython API, {a.runs} runs, torch {torch_version()}, {os.cpu_count()} CPUs, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    for model in ("lenet", "resnet18"):
        stock = statistics.median(results[(model, "stock DDP, nano-run -n 2")])
        print(f"\n{model}: img/s, median (min-max)                 img/s            vs stock DDP")
        for (m, name), values in results.items():
            if m == model:
                print(f"  {name:42} {spread(values):24} {statistics.median(values) / stock:.3f}")
    print("\nlaunch overhead and memory, median (min-max)")
    for (kind, name), values in results.items():
        if kind in ("overhead", "memory"):
            print(f"  {name:62} {spread(values)}")
    print(f"  (dataset: {a.gb * 1024:.0f} MiB)")


def torch_version():
    import torch
    return torch.__version__


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("build", nargs="?")
    p.add_argument("--role", choices=["lite", "decorator", "single", "meet", "memory"])
    p.add_argument("--model", choices=["lenet", "resnet18"], default="lenet")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--runs", type=int, default=2)
    p.add_argument("--lenet-steps", type=int, default=60)
    p.add_argument("--resnet-steps", type=int, default=6)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--gb", type=float, default=1.0)
    p.add_argument("--find-unused", type=int, choices=[0, 1], default=1)
    p.add_argument("--spare", action="store_true")
    a = p.parse_args()
    if a.role:
        role(a)
    elif a.build:
        driver(a)
    else:
        p.error("give BUILD_DIR (or --role)")


if __name__ == "__main__":
    main()
