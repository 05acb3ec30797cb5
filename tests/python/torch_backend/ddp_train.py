"""One rank of a stock PyTorch DistributedDataParallel training on real Fashion-MNIST (Debian's
dataset-fashion-mnist), unchanged but for the backend it names: the LeNet-style CNN of the
benchmarks, SGD with momentum, DistributedSampler, 2048 training images. Rank 0 saves the final state_dict to --out.
Usage: ddp_train.py --backend nano|gloo --steps K --out FILE [--hook none|fp16|powersgd] [--init-method URL]
                    [--uneven]   (rank r trains K + 3r steps inside DDP's join(): uneven shards)
"""
import argparse
import datetime
import faulthandler
import os
import sys

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bench", "python"))
import pytorch_ddp  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--backend", required=True)
p.add_argument("--steps", type=int, default=12)
p.add_argument("--out", required=True)
p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
p.add_argument("--init-method", default="env://", help="env:// (torch's TCPStore), or nano:// (nano's job store)")
p.add_argument("--hook", choices=["none", "fp16", "powersgd"], default="none",
               help="a DDP communication hook of torch's (they run in the all-reduce futures' callbacks)")
p.add_argument("--uneven", action="store_true", help="rank r trains steps + 3r steps, inside DDP's join()")
a = p.parse_args()
# A rank still here after this long is stuck: every thread's stack to stderr, and out.
faulthandler.dump_traceback_later(int(os.environ.get("DDP_TRAIN_STUCK_AFTER", "240")), exit=True)
if a.backend == "nano" or a.init_method.startswith("nano://"):
    import nano_torch  # noqa: F401  registers "nano" and "nano://"
dist.init_process_group(a.backend, init_method=a.init_method, timeout=datetime.timedelta(seconds=60))
rank, world = dist.get_rank(), dist.get_world_size()
# The model and data of bench/python/pytorch_ddp.py (the LeNet-style CNN of examples/): the
# first 2048 training images.
data = pytorch_ddp.fashion_mnist_train(a.data_dir, limit=2048)
torch.manual_seed(rank)  # replicas start different: DDP's broadcast makes them equal
model = pytorch_ddp.LeNet()
ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1)  # several buckets
if a.hook == "fp16":
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
elif a.hook == "powersgd":
    # PowerSGD all-reduces again inside its futures' callbacks and waits for it there.
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook

    state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=1, start_powerSGD_iter=2)
    ddp.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
loader = DataLoader(data, batch_size=32, sampler=DistributedSampler(data, world, rank, shuffle=True, seed=0))
steps = a.steps + (3 * rank if a.uneven else 0)
with ddp.join(enable=a.uneven):
    for step, (x, y) in enumerate(loader):
        if step == steps:
            break
        opt.zero_grad()
        F.cross_entropy(ddp(x), y).backward()
        opt.step()
if rank == 0:
    torch.save(model.state_dict(), a.out)
    shm = nano_torch.uses_shared_memory() if a.backend == "nano" else False
    print(f"trained {a.steps} steps on {world} ranks ({a.backend}, shared memory {shm})", flush=True)
# DDP holds the process group: let it go first, so the group (and Gloo's threads) ends here and
# not in the interpreter's teardown (torch 1.13's Gloo then aborts now and again: "terminate
# called without an active exception").
del ddp, opt, loader
dist.destroy_process_group()
