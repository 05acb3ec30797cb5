"""@nano at N ranks against one process on N times the batch (auto_lr off, mean loss, no
shuffling): the same weights to float tolerance; the caller's model and optimizer hold rank 0's
state; the value comes back. The model is passed by keyword to show that keywords are found.
Usage: train_decorated.py N. Prints one JSON line."""
import json
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

from nano_torch import nano

N = int(sys.argv[1])
B = 8


def data():
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(96, 6, generator=g), torch.randn(96, 2, generator=g))


def fresh():
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


@nano(num_processes=N, auto_lr=False, oversubscribe=True)
def training_loop(optimizer, train_loader, num_epochs, loss_func, model=None):
    import os
    for _ in range(num_epochs):
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = loss_func(model(x), y)
            loss.backward()
            optimizer.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    momentum = torch.cat([optimizer.state[p]["momentum_buffer"].reshape(-1) for p in model.parameters()])
    return {"rank": int(os.environ.get("RANK", "0")), "weights": flat.tolist(), "momentum": momentum.tolist(),
            "shard": len(train_loader)}


model, optimizer = fresh()
got = training_loop(optimizer, DataLoader(data(), batch_size=B), 3, torch.nn.MSELoss(), model=model)
caller = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
caller_momentum = torch.cat([optimizer.state[p]["momentum_buffer"].reshape(-1) for p in model.parameters()])

ref, ref_optimizer = fresh()
for _ in range(3):
    for x, y in DataLoader(data(), batch_size=B * N):
        ref_optimizer.zero_grad()
        torch.nn.MSELoss()(ref(x), y).backward()
        ref_optimizer.step()
reference = torch.cat([p.detach().reshape(-1) for p in ref.parameters()])
print(json.dumps({
    "rank": got["rank"], "shard_batches": got["shard"],
    "vs_reference": (torch.tensor(got["weights"]) - reference).abs().max().item(),
    "caller_vs_rank0": (caller - torch.tensor(got["weights"])).abs().max().item(),
    "momentum_vs_rank0": (caller_momentum - torch.tensor(got["momentum"])).abs().max().item(),
}))
