"""TorchNano's whole surface (BigDL-Nano's attributes, LightningLite's properties and methods) at N
ranks, as a BigDL-Nano user writes it; prints one JSON line of what rank 0 and the caller saw.
Usage: lite_surface.py N"""
import copy
import io
import json
import pickle
import sys

import torch
from torch.utils.data import DataLoader, TensorDataset

from nano_torch import TorchNano, nano

N = int(sys.argv[1])


class Unused(torch.nn.Module):
    """A model with a parameter its forward never uses (BigDL-Nano's DDP had find_unused_parameters)."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 1)
        self.spare = torch.nn.Linear(4, 1)

    def forward(self, x):
        return self.fc(x)


class Lite(TorchNano):
    def train(self):
        seen = {"inside": [self.global_rank, self.local_rank, self.node_rank, self.world_size, self.is_global_zero],
                "device": str(self.device), "num_processes": self.num_processes, "dtype": str(self.dtype)}
        g = torch.Generator().manual_seed(0)
        data = TensorDataset(torch.randn(16, 4, generator=g, dtype=torch.float64), torch.randn(16, 1, generator=g))
        model = Unused()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        model, optimizer = self.setup(model, optimizer, move_to_device=False)
        loader = self.setup_dataloaders(DataLoader(data, batch_size=4), move_to_device=False)
        whole = self.setup_dataloaders(DataLoader(data, batch_size=4), replace_sampler=False)
        seen["batches"] = [len(loader), len(whole)]
        seen["optimizer"] = {"isinstance_sgd": isinstance(optimizer, torch.optim.SGD),
                             "is_user_optimizer": optimizer.optimizer.__class__.__name__,
                             "max_step": optimizer.max_step, "cur_step": optimizer.cur_step,
                             "cur_lr_ratio": optimizer.cur_lr_ratio, "max_lr_ratio": optimizer.max_lr_ratio,
                             "auto_lr": optimizer.auto_lr}
        for x, y in loader:  # float64 inputs at precision 32: cast to float32 by the model
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            self.backward(loss, model=model)
            optimizer.step()
        seen["trained_with_unused"] = True
        # after the steps: BigDL-Nano's warm-up advanced; the wrapper pickles, copies and saves as
        # the user's optimizer; what is set on it or loaded into it is the user's optimizer's
        seen["after_steps"] = [optimizer.cur_step, optimizer.cur_lr_ratio, optimizer.param_groups[0]["lr"]]
        saved = io.BytesIO()
        torch.save({"optimizer": optimizer}, saved)
        seen["copies"] = [type(pickle.loads(pickle.dumps(optimizer))).__name__,
                          type(copy.deepcopy(optimizer)).__name__,
                          type(torch.load(io.BytesIO(saved.getvalue()), weights_only=False)["optimizer"]).__name__]
        optimizer.custom_flag = 3
        state = optimizer.state_dict()
        state["param_groups"][0]["lr"] = 0.25
        optimizer.load_state_dict(state)
        optimizer.add_param_group({"params": [torch.nn.Parameter(torch.zeros(1))], "lr": 0.5})
        inner = optimizer.optimizer
        seen["through"] = [getattr(inner, "custom_flag", None), inner.param_groups[0]["lr"], len(inner.param_groups),
                           optimizer.param_groups is inner.param_groups]
        seen["gather_tensor"] = list(self.all_gather(torch.tensor([self.global_rank, 7])).shape)
        seen["gather_number"] = self.all_gather(3).tolist()
        gathered = self.all_gather({"a": torch.ones(2), "b": [torch.zeros(1)]})
        seen["gather_dict"] = [list(gathered["a"].shape), list(gathered["b"][0].shape)]
        x = torch.full((2,), float(self.global_rank + 1), requires_grad=True)
        self.all_gather(x, sync_grads=True).sum().backward()
        seen["gather_grad"] = x.grad.tolist()
        seen["to_device"] = [str(self.to_device(torch.ones(1)).device),
                             str(self.to_device({"k": [torch.ones(1)]})["k"][0].device),
                             type(self.to_device(torch.nn.Linear(1, 1))).__name__]
        seen["broadcast"] = self.broadcast({"from": self.global_rank})["from"]
        self.barrier("done")
        return seen


lite = Lite(num_processes=N, accelerator="cpu", devices=N, num_nodes=1, strategy="ddp", gpus=None, plugins=None)
outside = [lite.global_rank, lite.local_rank, lite.node_rank, lite.world_size, lite.is_global_zero]
attributes = {k: getattr(lite, k) for k in ("num_processes", "use_ipex", "cpu_for_each_process", "channels_last",
                                            "auto_lr")}
got = lite.train()
got.update(outside=outside, attributes=attributes, run=lite.run(), seed=TorchNano.seed_everything(),
           seed_given=TorchNano.seed_everything(5))


@nano(num_processes=N, strategy="ddp_spawn", accelerator="auto")
def decorated(model, optimizer, loader):
    for x, y in loader:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    return [type(optimizer).__name__, optimizer.max_lr_ratio, str(model(torch.ones(1, 4, dtype=torch.float64)).dtype)]


net = Unused()
got["decorated"] = decorated(net, torch.optim.SGD(net.parameters(), lr=0.1),
                             DataLoader(TensorDataset(torch.randn(8, 4), torch.randn(8, 1)), batch_size=2))
print(json.dumps(got))
