"""One rank of a stock PyTorch DistributedDataParallel training on real Fashion-MNIST (Debian's
dataset-fashion-mnist), unchanged but for the backend it names: a LeNet-style CNN, SGD with
momentum, DistributedSampler, 2048 training images. Rank 0 saves the final state_dict to --out.
Usage: ddp_train.py --backend nano|gloo --steps K --out FILE
"""
import argparse
import datetime
import gzip
import os

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

p = argparse.ArgumentParser()
p.add_argument("--backend", required=True)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--out", required=True)
p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
a = p.parse_args()
if a.backend == "nano":
    import nano_torch  # noqa: F401  registers "nano"
dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()


def idx(name, header_ints, count):
    with gzip.open(os.path.join(a.data_dir, name), "rb") as f:
        raw = f.read(4 * header_ints + count * (784 if header_ints == 4 else 1))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 * header_ints)


images = torch.from_numpy(idx("train-images-idx3-ubyte.gz", 4, 2048).astype(np.float32)).reshape(-1, 1, 28, 28)
labels = torch.from_numpy(idx("train-labels-idx1-ubyte.gz", 2, 2048).astype(np.int64))
data = TensorDataset((images / 255.0 - 0.2860) / 0.3530, labels)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc2(F.relu(self.fc1(h.flatten(1))))


torch.manual_seed(rank)  # replicas start different: DDP's broadcast makes them equal
model = Net()
ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)  # several buckets
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data, world, rank, shuffle=True, seed=0))
for step, (x, y) in enumerate(loader):
    if step == a.steps:
        break
    opt.zero_grad()
    F.cross_entropy(ddp(x), y).backward()
    opt.step()
if rank == 0:
    torch.save(model.state_dict(), a.out)
    print(f"trained {a.steps} steps on {world} ranks ({a.backend})", flush=True)
dist.destroy_process_group()
