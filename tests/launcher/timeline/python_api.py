"""The timeline of the Python API's ranks: python_api.py TRACE KIND [SLOW_RANK_MS]. KIND "lite"
trains a small model with TorchNano, "lite-gloo" the same on the gloo process group backend,
"decorated" with @nano, each in 2 ranks, 30 steps of 64 samples, timeline=TRACE; with
SLOW_RANK_MS rank 1 sleeps that long in each step's forward."""
import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from nano_torch import TorchNano, nano

trace, kind = sys.argv[1], sys.argv[2]
slow_ms = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0


class Slow(nn.Module):
    """A small convolutional model; on rank 1 each training forward sleeps slow_ms."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 26 * 26, 10))

    def forward(self, x):
        if slow_ms and self.training and torch.distributed.is_initialized() and torch.distributed.get_rank() == 1:
            time.sleep(slow_ms / 1000)
        return self.net(x)


def data():
    g = torch.Generator().manual_seed(0)
    return DataLoader(TensorDataset(torch.randn(2 * 30 * 64, 1, 28, 28, generator=g),
                                    torch.randint(0, 10, (2 * 30 * 64,), generator=g)), batch_size=64, shuffle=True)


def train_loop(model, optimizer, loader):
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    for x, y in loader:
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
    return float(loss)


class Lite(TorchNano):
    def train(self):
        model = Slow()
        model, optimizer, loader = self.setup(model, torch.optim.SGD(model.parameters(), lr=0.01), data())
        # A scheduler made after setup() wraps the set-up optimizer's step (a bound method).
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=10)
        loss = train_loop(model, optimizer, loader)
        scheduler.step()
        return loss


if kind == "lite":
    print(Lite(num_processes=2, timeline=trace).train())
elif kind == "lite-gloo":
    print(Lite(num_processes=2, timeline=trace, process_group_backend="gloo").train())
else:
    model = Slow()
    print(nano(num_processes=2, timeline=trace)(train_loop)(model, torch.optim.SGD(model.parameters(), lr=0.01), data()))
