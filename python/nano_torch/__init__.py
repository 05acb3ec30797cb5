"""nano's collectives for stock PyTorch programs: importing this module registers a
torch.distributed backend named "nano", and a rendezvous "nano://".

    import nano_torch  # registers "nano" and "nano://"
    torch.distributed.init_process_group("nano")

On one host, all_reduce, broadcast, all_gather and barrier go through shared memory; every
other operation, and every operation across hosts, through a Gloo group the backend keeps.
nano-run puts this package on every rank's PYTHONPATH.

init_method="nano://" meets in the job's own store instead of torch's TCPStore: a file in
/dev/shm when every rank is on one host, and across the hosts of a nano-run job nano's job
store, which admits only ranks that know the job's secret (torch's TCPStore admits anyone who
reaches MASTER_ADDR:MASTER_PORT). It reads RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT as
env:// does, and works with any backend.

init_process_group's timeout bounds the whole join: torch's TCPStore (env://) first waits for
the ranks on its own, so this package notes when init_process_group was called (it wraps
torch.distributed.init_process_group, changing nothing else) and the backend waits only for
what is left of the timeout.
"""
import atexit
import datetime
import functools
import inspect
import os
import threading
import time
import urllib.parse

import torch
import torch.distributed as dist

from . import _C, _timeline

BACKEND = "nano"


# When each thread's init_process_group started (absent: outside one).
_joining = {}


def _create(store, rank, world_size, timeout):
    started = _joining.get(threading.get_ident())
    left = datetime.timedelta(milliseconds=-1)  # outside init_process_group (new_group): all of it
    if started is not None:
        left = max(timeout - datetime.timedelta(seconds=time.monotonic() - started), datetime.timedelta(0))
    return _C.create(store, rank, world_size, timeout, left)


def _timed(init_process_group):
    @functools.wraps(init_process_group)
    def init_process_group_timed(*args, **kwargs):
        me = threading.get_ident()
        _joining[me] = time.monotonic()
        try:
            return init_process_group(*args, **kwargs)
        finally:
            _joining.pop(me, None)
    init_process_group_timed._nano_timed = True
    return init_process_group_timed


def _monitored(monitored_barrier):
    # torch's dist.monitored_barrier() admits only groups whose backend is named "gloo", though
    # the check it makes is the process group's own method, which nano implements as Gloo does
    # (TorchBackend::monitoredBarrier). On a nano group the wrapper calls that method; on any
    # other group, or where this rank is not in the group, torch's function does all of it.
    @functools.wraps(monitored_barrier)
    def monitored_barrier_any(group=None, timeout=None, wait_all_ranks=False):
        given = {} if group is None else {"group": group}
        if dist.distributed_c10d._rank_not_in_group(group) or dist.get_backend(group) != BACKEND:
            return monitored_barrier(timeout=timeout, wait_all_ranks=wait_all_ranks, **given)
        if group is None or group is dist.GroupMember.WORLD:
            group = dist.distributed_c10d._get_default_group()
        if isinstance(timeout, (int, float)):  # torch 2 takes seconds too
            timeout = datetime.timedelta(seconds=timeout)
        if timeout is None:  # the group's own timeout (torch's default would be 30 min)
            return group.monitored_barrier(wait_all_ranks=wait_all_ranks)
        return group.monitored_barrier(timeout, wait_all_ranks=wait_all_ranks)
    monitored_barrier_any._nano_wrapped = True
    return monitored_barrier_any


def _register():
    if hasattr(dist.Backend, BACKEND.upper()):
        return
    # torch 2.x asks which devices a backend serves (1.13 has no such argument).
    if "devices" in inspect.signature(dist.Backend.register_backend).parameters:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu"])
    else:
        dist.Backend.register_backend(BACKEND, _create)


def _nano_rendezvous(url, timeout=datetime.timedelta(minutes=30), **kwargs):
    query = dict(urllib.parse.parse_qsl(urllib.parse.urlparse(url).query))
    rank = int(query.get("rank", os.environ.get("RANK", "-1")))
    world_size = int(query.get("world_size", os.environ.get("WORLD_SIZE", "-1")))
    if rank < 0 or world_size < 1:
        raise ValueError("nano:// needs RANK and WORLD_SIZE (in the environment, as nano-run and torchrun set them)")
    yield (_C.store(rank, world_size, timeout), rank, world_size)
    # torch's own handlers end the same way: a store serves one rendezvous.
    raise RuntimeError("nano:// rendezvous is done once per process group")


def _backend_of(group):
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if hasattr(pg, "_get_backend"):  # torch 2.x: the backend behind the process group
        pg = pg._get_backend(torch.device("cpu"))
    return pg


def uses_shared_memory(group=None):
    """True when `group` (default: the default group) is a nano group whose collectives go
    through shared memory (every rank on this host)."""
    return _C.uses_shared_memory(_backend_of(group))


def hierarchical(group=None):
    """True when `group` (default: the default group) is a nano group that spans hosts and
    all-reduces hierarchically: shared memory inside each host, one exchange per local rank
    between hosts (every host holds the same number of ranks, two or more)."""
    return _C.hierarchical(_backend_of(group))


def _drain_at_exit():
    # Every backend thread finishes what it was given (DDP's last futures and their callbacks
    # included) while the interpreter still runs: a thread that needs the interpreter once it
    # is finalizing is ended inside a C++ frame, and the process aborts. A collective still
    # waiting on a peer is bounded by the group's own timeout; the exit waits 10 s at most.
    _C._drain(datetime.timedelta(seconds=10))


_register()
if not getattr(dist.init_process_group, "_nano_timed", False):
    dist.init_process_group = _timed(dist.init_process_group)
if not getattr(dist.monitored_barrier, "_nano_wrapped", False):
    dist.monitored_barrier = _monitored(dist.monitored_barrier)
try:
    dist.register_rendezvous_handler("nano", _nano_rendezvous)
except RuntimeError:  # registered already: the module loaded twice under two names
    pass
atexit.register(_drain_at_exit)
_timeline.watch_stock_optimizers()  # with nano-run --timeline on torch 2: the program's steps

# BigDL-Nano's Python API (torch_nano.py). Imported last: it uses the backend registered above.
from .torch_nano import RankFailedError, TorchNano, nano  # noqa: E402

# Lightning's seed_everything, which BigDL-Nano's tutorials import from pytorch_lightning.
seed_everything = TorchNano.seed_everything
