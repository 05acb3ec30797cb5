"""What setup() does inside a rank (and in the caller's own process at num_processes=1): the
model in DDP on the job's process group, in the options' precision and memory format; auto_lr
on the optimizers; each DataLoader sharded across the ranks, every rank keeping the batch size
it was given (BigDL-Nano's semantics: the global batch grows N-fold)."""
import contextlib
import dataclasses
import itertools
import os
import types

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, RandomSampler, SequentialSampler

from . import _timeline


@dataclasses.dataclass
class World:
    """This process's place among the ranks of one training."""
    rank: int
    world_size: int
    local_rank: int
    options: object  # _options.Options
    checkpointer: object = None  # _checkpoint.Checkpointer once something is set up with checkpoint_dir

    @property
    def distributed(self):
        return self.world_size > 1 and dist.is_initialized()

    def checkpoints(self):
        """The checkpointer, made on first use; None without checkpoint_dir, and in a trial of
        nano-run --tune (NANO_TUNE_TRIAL=1), which leaves the user's folder as it is: not made,
        not claimed, never written (as the C++ API's)."""
        if os.environ.get("NANO_TUNE_TRIAL") == "1":
            return None
        if self.checkpointer is None and self.options.checkpoint:
            from ._checkpoint import Checkpointer
            self.checkpointer = Checkpointer(self, self.options.checkpoint)
        return self.checkpointer


def autocast(options):
    """The context the ranks' forward runs in: CPU autocast to bfloat16 for precision "bf16"."""
    if options.precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


class NanoModule(torch.nn.Module):
    """The model setup() hands back: calls go through DDP (and autocast); state_dict() and
    load_state_dict() are the user's module's own, without DDP's "module." prefix; any other
    attribute is the user's module's."""

    def __init__(self, module, forward_module, options):
        super().__init__()
        self._forward_module = forward_module
        object.__setattr__(self, "_nano_module", module)  # not a second registered child
        self._nano_options = options

    @property
    def module(self):
        return self._nano_module

    def forward(self, *args, **kwargs):
        _timeline.forward_begin(self)
        with autocast(self._nano_options):
            return self._forward_module(*args, **kwargs)

    def state_dict(self, *args, **kwargs):
        return self._nano_module.state_dict(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        return self._nano_module.load_state_dict(*args, **kwargs)

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._nano_module, name)


def format_module(module, options):
    if options.precision == "64":
        module.double()
    if options.channels_last:
        module.to(memory_format=torch.channels_last)
    return module


def format_batch(batch, options):
    """The batch in the options' precision ("64": floating tensors in float64) and memory format
    (channels_last: 4-D tensors), as the model expects it."""
    if isinstance(batch, torch.Tensor):
        if options.precision == "64" and batch.is_floating_point():
            batch = batch.double()
        if options.channels_last and batch.dim() == 4:
            batch = batch.contiguous(memory_format=torch.channels_last)
        return batch
    if isinstance(batch, (list, tuple)) and not hasattr(batch, "_fields"):
        return type(batch)(format_batch(b, options) for b in batch)
    if isinstance(batch, dict):
        return {k: format_batch(v, options) for k, v in batch.items()}
    return batch


def setup_model(module, world):
    format_module(module, world.options)
    forward = module
    if world.distributed:
        forward = torch.nn.parallel.DistributedDataParallel(module)
    _timeline.watch_model(forward)
    if world.checkpoints():
        world.checkpointer.models.append(module)
    return NanoModule(module, forward, world.options)


def auto_lr_ratio(step, world_size, length):
    """1 + (N-1) * min(step, L) / L: nano::auto_lr_ratio's schedule (BigDL-Nano's warm-up)."""
    return 1.0 + (world_size - 1) * min(step, length) / length


def batch_world_size(world_size):
    """The world size the per-rank batch and the rate were chosen for: an elastic launch that
    keeps the global batch (batch_policy="global") gives its first world's, NANO_BATCH_WORLD_SIZE
    (nano::batch_world_size, <nano/batch_policy.h>); else `world_size`."""
    text = os.environ.get("NANO_BATCH_WORLD_SIZE", "")
    if not text:
        return world_size
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"nano_torch: bad NANO_BATCH_WORLD_SIZE={text}: expected a count >= 1")
    return int(text)


def per_rank_batch(batch_size, batch_world, world_size):
    """The per-rank batch that keeps batch_size x batch_world samples a step over world_size
    ranks, rounded up (nano::per_rank_batch)."""
    if batch_world == world_size:
        return batch_size
    return -(-batch_size * batch_world // world_size)


def setup_optimizer(optimizer, world):
    """auto_lr: after each step() the rate moves towards N times the user's, multiplying the
    group's current rate (the previous factor divided out), so a user schedule still composes.
    A step() also ends the timeline's step (_timeline.optimizer_stepping)."""
    options = world.options
    if world.checkpoints() and optimizer not in world.checkpointer.optimizers:
        world.checkpointer.optimizers.append(optimizer)
    lr_world = batch_world_size(world.world_size)  # an elastic world may keep the first one's batch
    auto_lr = options.auto_lr and lr_world > 1
    # Only in a rank of several (never the caller's own optimizer at num_processes=1, which a
    # later call may ship to its ranks): auto_lr, or the timeline's steps where DDP syncs.
    if not (auto_lr or (_timeline.ON and world.distributed)) or getattr(optimizer, "_nano_set_up", False):
        return optimizer
    state = {"step": 0, "applied": 1.0}
    if auto_lr:
        optimizer._nano_auto_lr_state = state  # checkpoints save and restore it
    step = optimizer.step

    def stepped(self, *args, **kwargs):
        _timeline.optimizer_stepping()
        out = step(*args, **kwargs)
        if not auto_lr:
            return out
        state["step"] += 1
        ratio = auto_lr_ratio(state["step"], lr_world, options.auto_lr_warmup_steps)
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] / state["applied"] * ratio
        state["applied"] = ratio
        return out

    # A bound method, as torch's LR schedulers expect of optimizer.step (they wrap it).
    optimizer.step = types.MethodType(stepped, optimizer)
    optimizer._nano_set_up = True
    return optimizer


class _Resumable(torch.utils.data.Sampler):
    """A sampler that starts its next pass `skip` indices in (a resumed epoch), once."""

    def __init__(self, sampler):
        self.sampler, self.skip = sampler, 0

    def __iter__(self):
        skip, self.skip = self.skip, 0
        return itertools.islice(iter(self.sampler), skip, None)

    def __len__(self):
        return len(self.sampler)


class ShardedLoader:
    """One rank's share of a DataLoader: the same batch size, every len(dataset)/N-th sample
    (DistributedSampler), shuffled per epoch when the original shuffled; batches formatted. With
    checkpoints it knows its epoch and position, and resumes at them."""

    def __init__(self, loader, world):
        self._world = world
        self._epoch = 0  # epochs begun
        self._position = 0  # batches of the current epoch handed out
        self._iterating = False
        self._resume = (0, 0)
        self.sampler = None
        self.loader = loader
        checkpoints = world.checkpoints()
        # A sampler of the user's own (a subset, weights) is kept: its choice would be lost.
        shardable = (not isinstance(loader.dataset, IterableDataset) and loader.batch_size is not None
                     and type(loader.sampler) in (SequentialSampler, RandomSampler))
        if checkpoints and loader.num_workers > 0:
            raise ValueError("nano_torch: with checkpoint_dir a set-up DataLoader needs num_workers=0 (a resumed "
                             f"run repeats its batches exactly only then), got num_workers={loader.num_workers}")
        if shardable and (world.world_size > 1 or checkpoints):
            self.sampler = DistributedSampler(loader.dataset, num_replicas=world.world_size, rank=world.rank,
                                              shuffle=isinstance(loader.sampler, RandomSampler))
            self._sampler = _Resumable(self.sampler)
            batch_size = per_rank_batch(loader.batch_size, batch_world_size(world.world_size), world.world_size)
            kwargs = dict(batch_size=batch_size, sampler=self._sampler, num_workers=loader.num_workers,
                          collate_fn=loader.collate_fn, pin_memory=loader.pin_memory, drop_last=loader.drop_last,
                          timeout=loader.timeout, worker_init_fn=loader.worker_init_fn)
            if loader.num_workers > 0:
                kwargs.update(prefetch_factor=loader.prefetch_factor, persistent_workers=loader.persistent_workers,
                              multiprocessing_context=loader.multiprocessing_context)
            self.loader = DataLoader(loader.dataset, **kwargs)
        if checkpoints:
            if self.sampler is None:
                raise ValueError("nano_torch: with checkpoint_dir every set-up DataLoader needs a map-style dataset, "
                                 "a batch_size and no sampler of its own (it resumes by sample index)")
            checkpoints.loaders.append(self)

    def position(self):
        """(epoch, batch): where a resumed run goes on; the next epoch's start when not iterating."""
        return (self._epoch - 1, self._position) if self._iterating else (self._epoch, 0)

    def resume_at(self, epoch, position):
        self._resume = (epoch, position)

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        checkpoints = self._world.checkpointer
        if checkpoints:
            checkpoints.resume()
        epoch, self._position = self._epoch, 0
        self._epoch += 1
        if epoch < self._resume[0]:
            return  # finished before the checkpoint: runs empty
        if epoch == self._resume[0] and self._resume[1]:
            self._position = self._resume[1]
            self._sampler.skip = self._position * self.loader.batch_size
        if self.sampler is not None:
            self.sampler.set_epoch(epoch)
        self._iterating = True
        try:
            batches = iter(self.loader)
            while True:
                # Before the fetch: a checkpoint then holds the generators that the batch's own
                # draws (an augmentation in the dataset) start from.
                if checkpoints and self._position < len(self.loader):
                    checkpoints.before_batch(self)
                _timeline.data_begin()
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                self._position += 1
                batch = format_batch(batch, self._world.options)
                _timeline.data_end()
                yield batch
        finally:
            self._iterating = False

    def __getattr__(self, name):
        return getattr(self.loader, name)


def setup_loader(loader, world):
    return loader if isinstance(loader, ShardedLoader) else ShardedLoader(loader, world)


def is_model(value):
    """A model among a function's arguments: a module with parameters that is not a loss."""
    return (isinstance(value, torch.nn.Module) and not isinstance(value, torch.nn.modules.loss._Loss)
            and any(True for _ in value.parameters()))
