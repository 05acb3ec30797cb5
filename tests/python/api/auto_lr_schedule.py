"""auto_lr at N ranks against BigDL-Nano's schedule: the rate each step() runs at (recorded inside the
user's optimizer's step), the rate param_groups and state_dict() hold outside it, with a scheduler
that sets the rate outright (LambdaLR, OneCycleLR, CyclicLR) or changes it (StepLR,
ReduceLROnPlateau, SequentialLR), made before or after setup(), with max_step set by the user, and
after setting up again. Prints one JSON line of rank 0's records.
Usage: auto_lr_schedule.py N"""
import json
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

from nano_torch import TorchNano

N = int(sys.argv[1]) if __name__ == "__main__" else 0
STEPS = 12


class Recording(torch.optim.SGD):
    """SGD that records the rate of each of its steps, as it runs."""

    def __init__(self, params, lr):
        super().__init__(params, lr=lr, momentum=0.9)
        self.rates = []

    def step(self, closure=None):
        self.rates.append(self.param_groups[0]["lr"])
        return super().step(closure)


def schedulers(name, optimizer):
    """The user's scheduler `name` over `optimizer` (None: none)."""
    if name == "step":
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    if name == "plateau":  # told the same loss each step: halves the rate after 2 steps without progress
        return torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=1)
    if name == "sequential":
        return torch.optim.lr_scheduler.SequentialLR(optimizer, [
            torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.5, total_iters=4),
            torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)], milestones=[4])
    if name == "lambda":
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 + step)
    if name == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1.0, total_steps=STEPS + 1)
    if name == "cyclic":
        return torch.optim.lr_scheduler.CyclicLR(optimizer, base_lr=0.1, max_lr=1.0, step_size_up=3)
    return None


def step_scheduler(scheduler):
    if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
        scheduler.step(1.0)
    elif scheduler is not None:
        scheduler.step()


class Schedule(TorchNano):
    def train(self, name, when, max_step):
        g = torch.Generator().manual_seed(0)
        loader = DataLoader(TensorDataset(torch.randn(16 * N, 3, generator=g), torch.randn(16 * N, 1, generator=g)),
                            batch_size=1)
        model = torch.nn.Linear(3, 1)
        optimizer = Recording(model.parameters(), lr=0.5)
        scheduler = schedulers(name, optimizer) if when == "before" else None
        model, optimizer, loader = self.setup(model, optimizer, loader)
        if when == "after":
            scheduler = schedulers(name, optimizer)
        if max_step is not None:
            optimizer.max_step = max_step
        outside, saved = [], []
        for step, (x, y) in zip(range(STEPS), loader):
            optimizer.zero_grad()
            self.backward(torch.nn.functional.mse_loss(model(x), y))
            optimizer.step()
            outside.append(optimizer.param_groups[0]["lr"])
            saved.append(optimizer.state_dict()["param_groups"][0]["lr"])
            step_scheduler(scheduler)
        # Set up again (BigDL-Nano's test_torch_nano_load_state_dict): a fresh warm-up, whose first
        # step runs at the user's rate itself.
        model, again = self.setup(model.module, optimizer.optimizer)
        self.backward(torch.nn.functional.mse_loss(model(x), y))
        again.step()
        return {"inside": optimizer.optimizer.rates[:STEPS], "outside": outside, "saved": saved,
                "ratio": optimizer.cur_lr_ratio, "steps": optimizer.cur_step,
                "again": [again.optimizer.rates[-1] / again.param_groups[0]["lr"], again.cur_step],
                "isinstance": isinstance(optimizer, torch.optim.SGD)}


if __name__ == "__main__":
    got = {}
    for name, when, max_step in [("none", "", None), ("none", "", 4), ("lambda", "before", 1000),
                                 ("lambda", "after", 5), ("onecycle", "after", 6), ("cyclic", "before", 6),
                                 ("step", "after", 6), ("plateau", "before", 6), ("sequential", "after", 6)]:
        got[f"{name}-{when}-{max_step}"] = Schedule(num_processes=N).train(name, when, max_step)
    print(json.dumps(got))
