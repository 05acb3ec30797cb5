#!/usr/bin/python3
"""Stock PyTorch DistributedDataParallel throughput: the side-by-side reference for nano.

The same models as examples/common/models.cc (LeNet-style CNN on real Fashion-MNIST, CIFAR-style
ResNet-18 on synthetic 3x32x32), the same optimizers, batch per rank and steps, Gloo backend,
rendezvous from the torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Each rank
is started (and pinned with taskset) by bench/python/run.py. Rank 0 prints one line

    nano-result: {"images_per_sec": ..., "world_size": k, "threads": t, ...}

with the global images/s over the timed steps (warm-up steps are not timed).
With --single it is one plain process instead (no process group, no DDP wrapper): PyTorch's
own per-core base when pinned to one core with OMP_NUM_THREADS=1.
--dist-backend nano uses nano's torch.distributed backend (python: `import nano_torch`)
instead of Gloo, the one line a stock program changes.
Usage: pytorch_ddp.py {lenet|resnet18} --steps S [--warmup W] [--batch-size 64] [--data-dir D]
                      [--single] [--dist-backend gloo|nano]
"""
import argparse
import gzip
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset
from torch.utils.data.distributed import DistributedSampler

FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_MNIST_MEAN = 0.2860
FASHION_MNIST_STD = 0.3530


class LeNet(nn.Module):
    """conv3x3(1->32) relu pool2 - conv3x3(32->64) relu pool2 - fc(3136->128) relu -
    dropout(0.25) - fc(128->10), as examples/common/models.cc."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, padding=1)
        self.conv2 = nn.Conv2d(32, 64, 3, padding=1)
        self.fc1 = nn.Linear(64 * 7 * 7, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        h = F.dropout(F.relu(self.fc1(h.flatten(1))), 0.25, self.training)
        return self.fc2(h)


def conv3x3(cin, cout, stride=1):
    return nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = conv3x3(cin, cout, stride)
        self.conv2 = conv3x3(cout, cout)
        self.bn1 = nn.BatchNorm2d(cout)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut_conv = None
        if stride != 1 or cin != cout:
            self.shortcut_conv = nn.Conv2d(cin, cout, 1, stride=stride, bias=False)
            self.shortcut_bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        h = F.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        shortcut = self.shortcut_bn(self.shortcut_conv(x)) if self.shortcut_conv is not None else x
        return F.relu(h + shortcut)


class ResNet18(nn.Module):
    """CIFAR-style ResNet-18 (3x3 stem, no max-pool), as examples/common/models.cc."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.stem_conv = conv3x3(3, 64)
        self.stem_bn = nn.BatchNorm2d(64)
        blocks, cin = [], 64
        for stage, width in enumerate([64, 128, 256, 512]):
            for b in range(2):
                blocks.append(BasicBlock(cin, width, 2 if stage > 0 and b == 0 else 1))
                cin = width
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x):
        h = F.relu(self.stem_bn(self.stem_conv(x)))
        h = self.blocks(h)
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


def read_idx_gz(path, header_ints, item_bytes, limit=None):
    with gzip.open(path, "rb") as f:  # the first `limit` items only, when given
        raw = f.read(-1 if limit is None else 4 * header_ints + limit * item_bytes)
    return np.frombuffer(raw, dtype=np.uint8, offset=4 * header_ints)


def fashion_mnist_train(data_dir, limit=None):
    """The training set (its first `limit` images when given), normalised."""
    images = read_idx_gz(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), 4, 784, limit).reshape(-1, 1, 28, 28)
    labels = read_idx_gz(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), 2, 1, limit)
    x = (torch.from_numpy(images.astype(np.float32)) / 255.0 - FASHION_MNIST_MEAN) / FASHION_MNIST_STD
    return TensorDataset(x, torch.from_numpy(labels.astype(np.int64)))


class SyntheticCifar(Dataset):
    """`size` examples drawn from a pool of 512 N(0,1) images with labels 0..9."""

    def __init__(self, size, pool=512, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.size = size
        self.images = torch.randn(pool, 3, 32, 32, generator=g)
        self.labels = torch.randint(0, 10, (pool,), generator=g)

    def __len__(self):
        return self.size

    def __getitem__(self, i):
        j = i % self.images.shape[0]
        return self.images[j], self.labels[j]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", choices=["lenet", "resnet18"])
    p.add_argument("--steps", type=int, required=True, help="timed steps per rank")
    p.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    p.add_argument("--batch-size", type=int, default=64, help="batch per rank")
    p.add_argument("--data-dir", default=FASHION_MNIST_DIR)
    p.add_argument("--single", action="store_true", help="one plain process: no process group, no DDP")
    p.add_argument("--dist-backend", choices=["gloo", "nano"], default="gloo", help="torch.distributed backend")
    a = p.parse_args()
    if a.steps < 1 or a.warmup < 0 or a.batch_size < 1:
        sys.exit("pytorch_ddp.py: --steps and --batch-size must be >= 1, --warmup >= 0")

    if a.single:
        rank, world = 0, 1
    else:
        # PyTorch >= 2.4 hosts the env:// store on libuv unless told otherwise, and Debian 13's
        # torch 2.6 is built without it (nano-run sets the same for the ranks it starts).
        os.environ.setdefault("USE_LIBUV", "0")
        if a.dist_backend == "nano":
            import nano_torch  # noqa: F401  registers the "nano" backend
        # env:// rendezvous (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)
        dist.init_process_group(a.dist_backend)
        rank, world = dist.get_rank(), dist.get_world_size()
    barrier = (lambda: None) if a.single else dist.barrier
    torch.manual_seed(0)
    total = a.warmup + a.steps
    if a.model == "lenet":
        model = LeNet()
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        data = fashion_mnist_train(a.data_dir)
    else:
        model = ResNet18()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        data = SyntheticCifar(total * a.batch_size * world)
    ddp = model if a.single else nn.parallel.DistributedDataParallel(model)
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=a.batch_size, sampler=sampler, drop_last=False)
    if len(loader) < total:
        # Like fashion_mnist_nano: a rank's epoch ends with its shard; warm-up shrinks to fit.
        total = len(loader)
        a.warmup = min(a.warmup, total // 2)
        a.steps = total - a.warmup
        print(f"pytorch_ddp.py: {len(loader)} batches per rank: {a.warmup} warm-up + {a.steps} timed steps",
              file=sys.stderr)

    ddp.train()
    t0 = None
    done = 0
    for step, (x, y) in enumerate(loader):
        if step == a.warmup:
            barrier()
            t0 = time.perf_counter()
        if step == total:
            break
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        optimizer.step()
        loss.item()
        if step >= a.warmup:
            done += x.shape[0]
    barrier()
    seconds = time.perf_counter() - t0
    if rank == 0:
        result = {
            "images_per_sec": done * world / seconds,
            "world_size": world,
            "threads": torch.get_num_threads(),
            "steps": a.steps,
            "warmup_steps": a.warmup,
            "batch_size": a.batch_size,
            "seconds": seconds,
            "model": a.model,
            "torch": torch.__version__,
            "dist_backend": None if a.single else a.dist_backend,
        }
        print("nano-result: " + json.dumps(result), flush=True)
    if not a.single:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
