"""The Python API elastic across the test bed's hosts: @nano with 4 ranks on hostA:2,hostB:2,
min_hosts=1 and batch_policy="global", called on hostA. Rank 0 says "training on N ranks" as each
attempt starts; the test kills hostB for good while the 4 ranks train, and the call goes on with
hostA's 2 ranks and returns rank 0's value and trained model. Keeping the global batch, each of the
2 ranks takes 8 samples a step (the 4 ranks' 4 each), and auto_lr's target stays 4 x the rate.
Prints "training ...", then "returned WORLD batch B lr LR trained T"."""
import sys
import time

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, TensorDataset

from nano_torch import nano


@nano(num_processes=4, distributed_backend="mpi", hosts="hostA:2,hostB:2", min_hosts=1, max_restarts=2,
      restart_delay_ms=200, grace_period_ms=1000, heartbeat_timeout_ms=5000, batch_policy="global",
      auto_lr_warmup_steps=5)
def train(model, optimizer, loader):
    world = dist.get_world_size()
    if dist.get_rank() == 0:
        print("training on", world, "ranks", flush=True)
    # The 4-rank world trains until the test kills hostB (at most 20 s); the smaller one finishes.
    steps, batch, limit = 0, 0, 400 if world == 4 else 10
    while steps < limit:
        for x, y in loader:
            batch = batch or len(x)
            optimizer.zero_grad()
            (model(x) - y).pow(2).mean().backward()
            optimizer.step()
            time.sleep(0.05)
            steps += 1
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
