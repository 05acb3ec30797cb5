"""A module with @nano at its top, as BigDL-Nano's decorator tests have it: every rank imports this
module again (the training ships by reference to it), so the decorator runs again in ranks pinned
to fewer cores than it asks for: DECORATED_RANKS ranks (2: one core each of a 2-core machine; 4
with DECORATED_OVERSUBSCRIBE=1: four ranks share 2 cores).
Usage (the caller): decorated_module.py -> prints the ranks' world, rank 0's CPUs and whether the
caller's model was trained."""
import json
import os

import torch
from torch.utils.data import DataLoader, TensorDataset

from nano_torch import nano

RANKS = int(os.environ.get("DECORATED_RANKS", "4"))


def train_loop(model, optimizer, loader):
    for x, y in loader:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()


@nano(num_processes=RANKS, oversubscribe=os.environ.get("DECORATED_OVERSUBSCRIBE") == "1")
def train(model, optimizer, loader):
    train_loop(model, optimizer, loader)  # by reference: the ranks import this module for it
    return {"world": int(os.environ["WORLD_SIZE"]), "cpus": len(os.sched_getaffinity(0)),
            "imported": "decorated_module" in __import__("sys").modules}


if __name__ == "__main__":
    import decorated_module  # the module by its importable name: the ranks import it as the caller did
    net = torch.nn.Linear(2, 1)
    before = net.weight.detach().clone()
    got = decorated_module.train(net, torch.optim.SGD(net.parameters(), lr=0.1),
                                 DataLoader(TensorDataset(torch.randn(16, 2), torch.randn(16, 1)), batch_size=2))
    got["trained"] = not torch.equal(before, net.weight.detach())
    print(json.dumps(got))
