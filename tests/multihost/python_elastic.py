"""The Python API elastic across the test bed's hosts: @nano with 4 ranks on hostA:2,hostB:2,
min_hosts=1, batch_policy="global" and checkpoints every 5 steps in FOLDER, called on hostA. Rank 0
says "training on N ranks" as each attempt starts; the test kills hostB for good while the 4 ranks
train, and the call goes on with hostA's 2 ranks from the 4 ranks' newest checkpoint (not from the
start) and returns rank 0's value and trained model. Keeping the global batch, each of the 2 ranks
takes 8 samples a step (the 4 ranks' 4 each), and auto_lr's target stays 4 x the rate.
MODE "rejoin" (rejoin=True, host_lost_after=1): the test brings hostB back while the 2 ranks
train; they stop at their next checkpoint once it is on disk and the 4 ranks resume from it.
Prints "training ...", then "returned WORLD batch B lr LR trained T".
Usage: python_elastic.py MODE FOLDER   (MODE: shrink | rejoin)"""
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset

from nano_torch import nano

MODE, FOLDER = sys.argv[1], sys.argv[2]
rejoin = {"rejoin": True, "host_lost_after": 1} if MODE == "rejoin" else {}


@nano(num_processes=4, distributed_backend="mpi", hosts="hostA:2,hostB:2", min_hosts=1, max_restarts=3,
      restart_delay_ms=200, grace_period_ms=1000, heartbeat_timeout_ms=5000, batch_policy="global",
      auto_lr_warmup_steps=5, checkpoint_dir=FOLDER, checkpoint_every_steps=5, **rejoin)
def train(model, optimizer, loader):
    world = dist.get_world_size()
    attempt = int(os.environ["NANO_RESTART_COUNT"])
    if dist.get_rank() == 0:
        print("training on", world, "ranks", flush=True)
    # Until the test changes the world (at most 20 s), then 10 steps more. Finished epochs of a
    # resumed attempt run empty; the loop goes on to the epoch it stopped in.
    changes = 2 if MODE == "rejoin" else 1
    steps, batch, limit = 0, 0, 400 if attempt < changes else 10
    for _ in range(1000):
        for x, y in loader:
            batch = batch or len(x)
            optimizer.zero_grad()
            (model(x) - y).pow(2).mean().backward()
            optimizer.step()
            time.sleep(0.05)
            steps += 1
            if steps == limit:
                break
        if steps == limit:
            break
    # The rate the next step runs at: the user's (param_groups) times the warm-up's factor (auto_lr).
    return world, batch, optimizer.param_groups[0]["lr"] * optimizer.cur_lr_ratio


torch.manual_seed(0)
model = torch.nn.Linear(8, 2)
before = model.weight.detach().clone()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(64, 8), torch.randn(64, 2)), batch_size=4, shuffle=True)
world, batch, lr = train(model, optimizer, loader)
print("returned", world, "batch", batch, "lr", round(lr, 6), "trained", not torch.equal(before, model.weight))
sys.stdout.flush()
