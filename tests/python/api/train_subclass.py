"""A TorchNano subclass at N ranks: the caller's model (an attribute of the instance) holds rank
0's weights afterwards; setup()'s return shapes; the rank properties, all_gather and broadcast;
print() and a tqdm bar from rank 0 only; train()'s value from rank 0.
Usage: train_subclass.py N [precision] [channels_last] [process_group_backend] [distributed_backend]
Prints one JSON line."""
import json
import os
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

from nano_torch import TorchNano

N = int(sys.argv[1])
PRECISION = sys.argv[2] if len(sys.argv) > 2 else "32"
CHANNELS_LAST = len(sys.argv) > 3 and sys.argv[3] == "1"
PG = None if len(sys.argv) <= 4 or sys.argv[4] == "nano" else sys.argv[4]
LAUNCH = sys.argv[5] if len(sys.argv) > 5 else "subprocess"


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 4, 3)
        self.fc = torch.nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


class MyNano(TorchNano):
    def __init__(self, model, **kwargs):
        super().__init__(**kwargs)
        self.model = model

    def train(self, epochs):
        from tqdm import tqdm
        optimizer = torch.optim.Adam(self.model.parameters(), lr=0.01)
        g = torch.Generator().manual_seed(0)
        data = TensorDataset(torch.randn(48, 2, 6, 6, generator=g), torch.randint(0, 3, (48,), generator=g))
        loader = DataLoader(data, batch_size=4, shuffle=True)
        model, optimizer, loader = self.setup(self.model, optimizer, loader)
        two = self.setup(torch.nn.Linear(2, 2), [torch.optim.SGD(self.model.parameters(), lr=0.1)])
        self.print(f"PRINTED by rank {self.global_rank} of {self.world_size}")
        dtypes = set()
        for _ in range(epochs):
            for x, y in tqdm(loader, desc="BAR"):
                optimizer.zero_grad()
                with self.autocast():
                    out = model(x)
                dtypes.add(str(out.dtype))
                loss = torch.nn.functional.cross_entropy(out.float(), y)
                self.backward(loss)
                optimizer.step()
        ranks = self.all_gather(torch.tensor([self.global_rank]))
        token = self.broadcast({"from": self.global_rank})
        self.barrier()
        return {
            "rank": self.global_rank, "world": self.world_size, "local_rank": self.local_rank,
            "zero": self.is_global_zero, "gathered": ranks.reshape(-1).tolist(), "broadcast": token["from"],
            "setup_shapes": [len(two), type(two[1]).__name__], "param_dtype": str(next(self.model.parameters()).dtype),
            "channels_last": self.model.conv.weight.is_contiguous(memory_format=torch.channels_last),
            "out_dtypes": sorted(dtypes), "affinity": sorted(os.sched_getaffinity(0)),
            "backend": torch.distributed.get_backend() if torch.distributed.is_initialized() else "none",
            "weights": torch.cat([p.detach().double().reshape(-1) for p in self.model.parameters()]).tolist(),
        }


torch.manual_seed(3)
net = Net()
before = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
nano = MyNano(net, num_processes=N, precision=PRECISION, channels_last=CHANNELS_LAST, process_group_backend=PG,
              distributed_backend=LAUNCH, oversubscribe=True)
got = nano.train(2)
after = torch.cat([p.detach().double().reshape(-1) for p in net.parameters()])
got["caller_vs_rank0"] = (after - torch.tensor(got["weights"])).abs().max().item()
got["trained"] = (after - before.double()).abs().max().item()
del got["weights"]
print(json.dumps(got))
