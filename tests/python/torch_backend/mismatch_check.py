"""One rank of a program whose ranks call collectives that do not match, on the `nano` backend
under nano-run. After each collective a rank prints "VALUE ..." (what a user would go on with):
no such line may appear when the calls did not match.
Usage: mismatch_check.py CASE
  sizes       all_reduce of 1000 elements on rank 0, 1 on rank 1
  dtypes      float32 on rank 0, float64 on rank 1
  all_gather  all_gather of 4 elements on rank 0, 2 on rank 1
  src         broadcast from src=rank on each rank
  kinds       all_reduce on rank 0, broadcast on rank 1 (MISMATCH_SPLIT=K: all_reduce on ranks
              below K, broadcast on the others; across hosts, K = a host's ranks)
  barrier     a 12 MB all_reduce on rank 0, barrier on rank 1
  ddp_log     DDP training that logs its loss with an all_reduce, at step 10 on rank 0 and 20 on rank 1
  early_exit  rank 1 leaves with sys.exit(0) after 5 of 10 steps; rank 0 goes on
  extra       rank 1 makes one all_reduce more than rank 0, which ends normally
"""
import os
import sys

import torch
import torch.distributed as dist

import nano_torch  # noqa: F401

case = sys.argv[1]
dist.init_process_group("nano")
r = dist.get_rank()


def value(t):
    print(f"VALUE rank {r}: {t.flatten()[:3].tolist()}", flush=True)


if case == "sizes":
    t = torch.ones(1000 if r == 0 else 1) * (r + 1)
    dist.all_reduce(t)
    value(t)
elif case == "dtypes":
    t = torch.ones(8, dtype=torch.float32 if r == 0 else torch.float64) * (r + 1)
    dist.all_reduce(t)
    value(t)
elif case == "all_gather":
    t = torch.ones(4 if r == 0 else 2) * (r + 1)
    out = [torch.empty_like(t) for _ in range(2)]
    dist.all_gather(out, t)
    value(torch.cat(out))
elif case == "src":
    t = torch.full((4,), float(r))
    dist.broadcast(t, src=r)
    value(t)
elif case == "kinds":
    t = torch.ones(16) * (r + 1)
    if r < int(os.environ.get("MISMATCH_SPLIT", "1")):
        dist.all_reduce(t)
    else:
        dist.broadcast(t, src=0)
    value(t)
elif case == "barrier":
    if r == 0:
        t = torch.ones(3_000_000)
        dist.all_reduce(t)
        value(t)
    else:
        dist.barrier()
        print(f"VALUE rank {r}: passed the barrier", flush=True)
elif case == "ddp_log":
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(8, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    log_at = 10 if r == 0 else 20
    for step in range(30):
        x = torch.randn(16, 8)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step == log_at:
            logged = loss.detach().clone()
            dist.all_reduce(logged)
            value(logged)
    with torch.no_grad():
        print(f"VALUE rank {r}: checksum {sum(p.sum().item() for p in model.parameters()):.6f}", flush=True)
elif case == "early_exit":
    t = torch.ones(4)
    for step in range(10):
        if r == 1 and step == 5:
            sys.exit(0)
        dist.all_reduce(t)
    value(t)
elif case == "extra":
    t = torch.ones(4)
    for step in range(10 + (1 if r == 1 else 0)):
        dist.all_reduce(t)
    value(t)
else:
    sys.exit(f"unknown case {case}")
dist.destroy_process_group()
