#!/usr/bin/python3
"""One rank of scripts/bench.sh signature-cost: all_reduce through the `nano` torch backend of
the nano_torch on PYTHONPATH, a 4-byte tensor (many in a row, per call) and a 4 MB one. Rank 0
prints "RESULT SIZE MEDIAN_US" per size (the median over rounds of each round's mean).
Usage: signature_cost.py ROUNDS"""
import statistics
import sys
import time

import torch
import torch.distributed as dist

import nano_torch  # noqa: F401

rounds = int(sys.argv[1])
dist.init_process_group("nano")
small, big = torch.ones(1), torch.ones(1 << 20)
results = {}
for name, tensor, calls in (("4B", small, 2000), ("4MB", big, 20)):
    per_round = []
    for r in range(rounds + 1):  # the first round warms up
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(calls):
            dist.all_reduce(tensor)
        if r:
            per_round.append((time.perf_counter() - t0) / calls * 1e6)
    results[name] = statistics.median(per_round)
if dist.get_rank() == 0:
    for name, us in results.items():
        print(f"RESULT {name} {us:.2f}", flush=True)
dist.destroy_process_group()
