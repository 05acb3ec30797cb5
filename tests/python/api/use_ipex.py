"""use_ipex=True with precision bf16 at N ranks, a TorchNano with two optimizers and an @nano call
with one: trains, and prints one JSON line (the output's dtype inside the ranks). Whether IPEX is
there is the environment's (tests/python/api/fake_ipex on PYTHONPATH, or nothing).
Usage: use_ipex.py N"""
import json
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

from nano_torch import TorchNano, nano

N = int(sys.argv[1])


def data():
    g = torch.Generator().manual_seed(0)
    return DataLoader(TensorDataset(torch.randn(8, 4, generator=g), torch.randn(8, 1, generator=g)), batch_size=2)


class Two(TorchNano):
    def train(self):
        model = torch.nn.Linear(4, 1)
        first = torch.optim.SGD(model.parameters(), lr=0.1)
        second = torch.optim.Adam(model.parameters(), lr=0.01)
        model, (first, second), loader = self.setup(model, [first, second], data())
        for x, y in loader:
            first.zero_grad()
            out = model(x)
            torch.nn.functional.mse_loss(out, y).backward()
            first.step()
            second.step()
        return {"dtype": str(self.dtype), "out": str(out.dtype)}


@nano(num_processes=N, use_ipex=True, precision="bf16")
def decorated(model, optimizer, loader):
    for x, y in loader:
        optimizer.zero_grad()
        out = model(x)
        torch.nn.functional.mse_loss(out, y).backward()
        optimizer.step()
    return str(out.dtype)


got = Two(num_processes=N, use_ipex=True, precision="bf16").train()
net = torch.nn.Linear(4, 1)
got["decorated"] = decorated(net, torch.optim.SGD(net.parameters(), lr=0.1), data())
print(json.dumps(got))
