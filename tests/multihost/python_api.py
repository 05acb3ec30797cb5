"""The Python API across the test bed's hosts: @nano with distributed_backend "mpi" on hostA and
hostB, called on hostA. The payload reaches hostB's rank from hostA's (no job folder there), the
caller's model comes back trained, each rank says its host; then a rank on hostB raises, and
the caller's RankFailedError names its type and message (brought back by the launcher).
Prints "hosts ...", "trained ...", "raised ..." lines."""
import socket
import sys

import torch
import torch.distributed as dist

from nano_torch import RankFailedError, nano

HOSTS = "hostA:1,hostB:1"


@nano(num_processes=2, distributed_backend="mpi", hosts=HOSTS, auto_lr=False)
def train(model, optimizer, fail):
    names = [None, None]
    dist.all_gather_object(names, socket.gethostname())
    if fail and dist.get_rank() == 1:
        raise ValueError(f"boom on {socket.gethostname()}")
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.ones(4, 8)).pow(2).mean().backward()
        optimizer.step()
    return names


torch.manual_seed(0)
model = torch.nn.Linear(8, 2)
before = model.weight.detach().clone()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
print("hosts", *train(model, optimizer, False))
print("trained", not torch.equal(before, model.weight))
try:
    train(model, optimizer, True)
except RankFailedError as e:
    print("raised", e.rank, e.host, e.exc_type, e.message)
sys.stdout.flush()
