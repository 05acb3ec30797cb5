"""A launch started from a working folder another user could write: the caller runs a script that
lies elsewhere, so it imports nothing from the working folder, and neither may its ranks. Prints
the ranks' world size.
Usage: from_working_folder.py (run with a planted nano_torch/ in the working folder)"""
import torch
import torch.distributed as dist

from nano_torch import nano


@nano(num_processes=2)
def world(model):
    return dist.get_world_size()


print("world", world(torch.nn.Linear(1, 1)))
