"""nano's collectives for stock PyTorch programs: importing this module registers a
torch.distributed backend named "nano".

    import nano_torch  # registers "nano"
    torch.distributed.init_process_group("nano")

On one host, all_reduce, broadcast, all_gather and barrier go through shared memory; every
other operation, and every operation across hosts, through a Gloo group the backend keeps.
nano-run puts this package on every rank's PYTHONPATH.
"""
import atexit
import datetime
import inspect

import torch
import torch.distributed as dist

from . import _C

BACKEND = "nano"


def _create(store, rank, world_size, timeout):
    return _C.create(store, rank, world_size, timeout)


def _register():
    if hasattr(dist.Backend, BACKEND.upper()):
        return
    # torch 2.x asks which devices a backend serves (1.13 has no such argument).
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu"])
    else:
        dist.Backend.register_backend(BACKEND, _create)


def uses_shared_memory(group=None):
    """True when `group` (default: the default group) is a nano group whose collectives go
    through shared memory (every rank on this host)."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if hasattr(pg, "_get_backend"):  # torch 2.x: the backend behind the process group
        pg = pg._get_backend(torch.device("cpu"))
    return _C.uses_shared_memory(pg)


def _drain_at_exit():
    # Every backend thread finishes what it was given (DDP's last futures and their callbacks
    # included) while the interpreter still runs: a thread that needs the interpreter once it
    # is finalizing is ended inside a C++ frame, and the process aborts. A collective still
    # waiting on a peer is bounded by the group's own timeout; the exit waits 10 s at most.
    _C._drain(datetime.timedelta(seconds=10))


_register()
atexit.register(_drain_at_exit)
