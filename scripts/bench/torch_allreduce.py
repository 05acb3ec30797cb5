#!/usr/bin/python3
"""All-reduce through torch.distributed, the `nano` backend against Gloo, side by side in one
pair of processes: the default group is nano's, a second group of the same ranks is Gloo's, and
every repeat times each size on both in turn (interleaved, so drift on a noisy machine hits both
alike). Started as 2 ranks with torchrun's environment (scripts/bench/torch_backend.sh). Rank 0
prints, per backend and size, "RESULT torch-BACKEND MB MEDIAN_MS MIN_MS MAX_MS".
Usage: torch_allreduce.py --sizes 4,44,200 --reps 9
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

import nano_torch  # noqa: F401  registers "nano"

p = argparse.ArgumentParser()
p.add_argument("--sizes", default="4,44,200", help="MB of float32, comma-separated")
p.add_argument("--reps", type=int, default=9)
a = p.parse_args()
os.environ.setdefault("USE_LIBUV", "0")
dist.init_process_group("nano")
groups = {"nano": None, "gloo": dist.new_group(backend="gloo")}
sizes = [float(s) for s in a.sizes.split(",")]
tensors = {mb: torch.full((int(mb * 1e6 / 4),), float(dist.get_rank())) for mb in sizes}
times = {(b, mb): [] for b in groups for mb in sizes}
for rep in range(a.reps + 2):  # the first two are warm-up (first-touch page faults)
    for mb in sizes:
        for name, group in groups.items():
            dist.barrier(group=group)
            t0 = time.perf_counter()
            dist.all_reduce(tensors[mb], group=group)
            ms = (time.perf_counter() - t0) * 1000
            if rep >= 2:
                times[(name, mb)].append(ms)
if dist.get_rank() == 0:
    for (name, mb), t in times.items():
        print(f"RESULT torch-{name} {mb:g} {statistics.median(t):.2f} {min(t):.2f} {max(t):.2f}", flush=True)
dist.destroy_process_group()
