#!/usr/bin/python3
"""The Python API's timeline cost per step, timed alone: timeline_python.py STEPS.

One process, a world of one on the nano backend (a FileStore), a small model in torch's DDP with
a few gradient buckets, and each step making the calls the Python API makes for the timeline
(the loader's batch, the model's forward, the optimizer's step; the backend notes each
collective). NANO_TIMELINE (a folder) set: the recorder is on; unset: every call returns at once,
what a run without the timeline pays. Prints "python-timeline: STEPS steps, US us per step".
bench/scripts/timeline.sh runs it both ways, in turn, and tells the difference.
"""
import datetime
import os
import sys
import tempfile
import time

import torch
import torch.distributed as dist

import nano_torch  # noqa: F401 - registers "nano"
from nano_torch import _timeline

steps = int(sys.argv[1])
torch.set_num_threads(1)
torch.manual_seed(0)
with tempfile.TemporaryDirectory() as tmp:
    store = dist.FileStore(os.path.join(tmp, "store"), 1)
    dist.init_process_group("nano", store=store, rank=0, world_size=1, timeout=datetime.timedelta(seconds=60))
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.01)  # a few buckets, as a real model has
    _timeline.watch_model(ddp)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(8, 64), torch.randint(0, 10, (8,))
    loss_fn = torch.nn.CrossEntropyLoss()
    start = None
    for step in range(steps + 100):
        if step == 100:  # after the warm-up (DDP rebuilds its buckets in its first steps)
            start = time.perf_counter()
        _timeline.data_begin()
        batch = x, y
        _timeline.data_end()
        _timeline.forward_begin(ddp)
        loss = loss_fn(ddp(batch[0]), batch[1])
        optimizer.zero_grad()
        loss.backward()
        _timeline.optimizer_stepping()
        optimizer.step()
    took = time.perf_counter() - start
    dist.destroy_process_group()
print(f"python-timeline: {steps} steps, {took / steps * 1e6:.2f} us per step", flush=True)
