#!/usr/bin/python3
"""All-reduce through torch.distributed, the `nano` backend against Gloo, side by side in one
set of processes: the default group is nano's, a second group of the same ranks is Gloo's, and
every repeat times each size on both in turn (interleaved, so drift on a noisy machine hits both
alike). Started with torchrun's environment (bench/scripts/torch-backend.sh: 2 ranks on one host;
bench/scripts/multihost.sh: across the test bed's hosts). Rank 0 prints, per backend, dtype and
size, "RESULT torch-BACKEND MB MEDIAN_MS MIN_MS MAX_MS" (BACKEND "nano", "gloo", or with
--dtypes bfloat16 "nano-bf16": Debian's Gloo cannot sum bfloat16; with --broadcast also "nano-broadcast" and
"gloo-broadcast", float32 from rank 0, timed to a barrier after it; with --all-gather also "nano-all_gather" and
"gloo-all_gather", float32, each rank giving MB / world size so that every rank ends with MB), and with
--link-bytes a seventh field: the MB each
host sent on its eth0 per all-reduce (read from /proc/self/net/dev by each host's LOCAL_RANK 0,
between barriers; the mean over hosts).
Usage: torch_allreduce.py --sizes 4,44,200 --reps 9 [--dtypes float32,bfloat16] [--link-bytes] [--broadcast]
                          [--all-gather]
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

import nano_torch  # noqa: F401  registers "nano"

p = argparse.ArgumentParser()
p.add_argument("--sizes", default="4,44,200", help="MB of the float32 tensor, comma-separated (a bfloat16 one "
               "has as many elements, half the bytes)")
p.add_argument("--reps", type=int, default=9)
p.add_argument("--dtypes", default="float32", help="float32 and/or bfloat16, comma-separated")
p.add_argument("--link-bytes", action="store_true", help="count the bytes each host's eth0 sent")
p.add_argument("--broadcast", action="store_true", help="also time float32 broadcasts from rank 0")
p.add_argument("--all-gather", action="store_true", help="also time float32 all_gathers of MB in all")
a = p.parse_args()
# Every bad value is refused here, before any rank joins a group (argparse: exit 2).
dtypes = a.dtypes.split(",")
for d in dtypes:
    if d not in ("float32", "bfloat16"):
        p.error(f"bad --dtypes entry '{d}': expected float32 or bfloat16")


def positive_mb(text):
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        p.error(f"bad --sizes entry '{text}': expected a positive number of MB")
    return value


sizes = [positive_mb(s) for s in a.sizes.split(",")]
if a.reps < 1:
    p.error(f"bad --reps {a.reps}: expected 1 or more")
os.environ.setdefault("USE_LIBUV", "0")
dist.init_process_group("nano")
groups = {"nano": None, "gloo": dist.new_group(backend="gloo")}
counts_host = a.link_bytes and os.environ.get("LOCAL_RANK", "0") == "0"


def sent_bytes():
    """What this host's eth0 has sent (its network namespace's /proc/self/net/dev)."""
    with open("/proc/self/net/dev") as f:
        for line in f:
            name, _, fields = line.partition(":")
            if name.strip() == "eth0":
                return int(fields.split()[8])
    raise SystemExit("torch_allreduce.py: --link-bytes: this host has no eth0")


tensors = {(mb, d): torch.full((int(mb * 1e6 / 4),), float(dist.get_rank()), dtype=getattr(torch, d))
           for mb in sizes for d in dtypes}
# (backend, dtype, MB, op): the all-reduces (bfloat16 on nano only), then the broadcasts and
# all-gathers.
times = {(b, d, mb, "all_reduce"): [] for b in groups for d in dtypes for mb in sizes if b == "nano" or d == "float32"}
if a.broadcast:
    times.update({(b, "float32", mb, "broadcast"): [] for b in groups for mb in sizes})
if a.all_gather:
    times.update({(b, "float32", mb, "all_gather"): [] for b in groups for mb in sizes})
    world = dist.get_world_size()
    pieces = {mb: torch.full((int(mb * 1e6 / 4 / world),), float(dist.get_rank())) for mb in sizes}
    gathered = {mb: [torch.empty_like(pieces[mb]) for _ in range(world)] for mb in sizes}
sent = {key: [] for key in times}
for rep in range(a.reps + 2):  # the first two are warm-up (first-touch page faults)
    # Each op, size and dtype on both backends in turn (Gloo, then nano): drift hits both alike.
    for (name, d, mb, op) in sorted(times, key=lambda k: (k[3], k[2], k[1], k[0])):
        group = groups[name]
        dist.barrier(group=group)
        before = sent_bytes() if counts_host else 0
        t0 = time.perf_counter()
        if op == "all_reduce":
            dist.all_reduce(tensors[(mb, d)], group=group)
        elif op == "all_gather":
            dist.all_gather(gathered[mb], pieces[mb], group=group)
        else:
            # Until every rank holds the bytes: rank 0's own call returns once they are sent.
            dist.broadcast(tensors[(mb, d)], src=0, group=group)
            dist.barrier(group=group)
        ms = (time.perf_counter() - t0) * 1000
        dist.barrier(group=group)
        if rep >= 2:
            times[(name, d, mb, op)].append(ms)
            if counts_host:
                sent[(name, d, mb, op)].append(sent_bytes() - before)
hosts_sent = [None] * dist.get_world_size()
dist.all_gather_object(hosts_sent, sent if counts_host else None, group=groups["gloo"])
hosts_sent = [s for s in hosts_sent if s is not None]
if dist.get_rank() == 0:
    for (name, d, mb, op), t in times.items():
        label = name if d == "float32" else f"{name}-bf16"
        if op != "all_reduce":
            label += f"-{op}"
        line = f"RESULT torch-{label} {mb:g} {statistics.median(t):.2f} {min(t):.2f} {max(t):.2f}"
        if a.link_bytes:
            per_host = [statistics.median(s[(name, d, mb, op)]) for s in hosts_sent]
            line += f" {statistics.mean(per_host) / 1e6:.2f}"
        print(line, flush=True)
dist.destroy_process_group()
