# A stock PyTorch program, unchanged from what torchrun would run: env:// rendezvous over
# Gloo, one all-reduce whose value is checked. Exit 0 only when the sum is right.
import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://")
rank = dist.get_rank()
world = dist.get_world_size()
assert world == int(os.environ["WORLD_SIZE"]), "world size mismatch"
t = torch.full((4,), float(rank + 1))
dist.all_reduce(t)
expected = world * (world + 1) / 2
ok = bool(torch.all(t == expected))
print(f"rank {rank}/{world} allreduce {t[0].item()} expected {expected} cpus {os.environ['NANO_CPUS']}", flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
