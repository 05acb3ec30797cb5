"""The Python API elastic across the test bed's hosts: @nano with 4 ranks on hostA:2,hostB:2 and
min_hosts=1, called on hostA. Rank 0 says "training on N ranks" as each attempt starts; the test
kills hostB for good while the 4 ranks train, and the call goes on with hostA's 2 ranks and
returns rank 0's value and trained model. Prints "training ...", then "returned N trained B"."""
import sys
import time

import torch
import torch.distributed as dist

from nano_torch import nano


@nano(num_processes=4, distributed_backend="mpi", hosts="hostA:2,hostB:2", min_hosts=1, max_restarts=2,
      restart_delay_ms=200, grace_period_ms=1000, heartbeat_timeout_ms=5000, auto_lr=False)
def train(model, optimizer):
    world = dist.get_world_size()
    if dist.get_rank() == 0:
        print("training on", world, "ranks", flush=True)
    # The 4-rank world trains until the test kills hostB (at most 20 s); the smaller one finishes.
    for _ in range(400 if world == 4 else 10):
        optimizer.zero_grad()
        model(torch.ones(4, 8)).pow(2).mean().backward()
        optimizer.step()
        time.sleep(0.05)
    return world


torch.manual_seed(0)
model = torch.nn.Linear(8, 2)
before = model.weight.detach().clone()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
world = train(model, optimizer)
print("returned", world, "trained", not torch.equal(before, model.weight))
sys.stdout.flush()
