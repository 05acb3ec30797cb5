"""@nano with checkpoint_dir and max_restarts: 2 ranks, dropout (the generators matter), shuffled
batches, auto_lr on, 3 epochs of 6 steps, a checkpoint every 4 steps. MODE "killed": rank 1
SIGKILLs itself before its 10th step in the first attempt; the launcher starts the ranks again
and they resume from step 8. Prints the caller's final weights and rank 0's step count as JSON;
a resumed run's must equal an uninterrupted one's bit for bit.
Usage: train_resume.py MODE CHECKPOINT_DIR"""
import json
import os
import signal
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

from nano_torch import nano

MODE, FOLDER = sys.argv[1], sys.argv[2]
RANKS = 3 if MODE == "three" else 2  # "three": resume a 2-rank folder with 3 ranks


@nano(num_processes=RANKS, checkpoint_dir=FOLDER, checkpoint_every_steps=4, max_restarts=1 if RANKS == 2 else 0,
      restart_delay_ms=100, oversubscribe=RANKS > 2)
def training(model, optimizer, loader, epochs):
    steps = 0
    for _ in range(epochs):
        for x, y in loader:
            steps += 1
            if MODE == "killed" and os.environ["NANO_RESTART_COUNT"] == "0" and os.environ["RANK"] == "1" \
                    and steps == 10:
                os.kill(os.getpid(), signal.SIGKILL)
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
    return {"attempt": os.environ["NANO_RESTART_COUNT"], "steps_this_attempt": steps}


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
g = torch.Generator().manual_seed(1)
data = TensorDataset(torch.randn(96, 8, generator=g), torch.randint(0, 3, (96,), generator=g))
got = training(model, optimizer, DataLoader(data, batch_size=8, shuffle=True), 3)
got["weights"] = [float.hex(v) for v in torch.cat([p.detach().reshape(-1) for p in model.parameters()]).tolist()]
got["checkpoints"] = sorted(n for n in os.listdir(FOLDER) if not n.startswith("."))  # not the key, nor the claim
got["caller_lr"] = optimizer.param_groups[0]["lr"]  # auto_lr's factor divided out: the caller's own rate
print(json.dumps(got))
