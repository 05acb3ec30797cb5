"""The DataLoaders setup() and setup_dataloaders() hand back: each rank's share of the user's
loader (DistributedSampler: every N-th sample; each rank keeps the batch size it was given, so the
global batch grows N-fold, BigDL-Nano's semantics), shuffled per epoch when the user's loader
shuffled, batches formatted for the model (_model.format_batch). With checkpoints a loader knows
its epoch and position and resumes at them."""
import itertools
import os

import torch
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, RandomSampler, SequentialSampler

from . import _model, _timeline


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


def _rest_of_epoch(sampler, consumed):
    """This rank's share of what DistributedSampler `sampler`'s epoch has left once its first
    `consumed` samples (in the epoch's order over all ranks) were trained on in a world of another
    size: the rest of the order, dealt anew over this world as DistributedSampler deals it."""
    whole = DistributedSampler(sampler.dataset, num_replicas=1, rank=0, shuffle=sampler.shuffle, seed=sampler.seed)
    whole.set_epoch(sampler.epoch)
    rest = list(whole)[consumed:]
    world = sampler.num_replicas
    if sampler.drop_last:
        rest = rest[:len(rest) // world * world]
    elif rest and len(rest) % world:
        pad = world - len(rest) % world
        rest += (rest * (pad // len(rest) + 1))[:pad]
    return rest[sampler.rank::world]


class _Resumable(torch.utils.data.Sampler):
    """A sampler that starts its next pass `skip` indices in (a resumed epoch of the same world),
    or hands out `rest` (a resumed epoch of another world), once."""

    def __init__(self, sampler):
        self.sampler, self.skip, self.rest = sampler, 0, None

    def __iter__(self):
        skip, self.skip = self.skip, 0
        rest, self.rest = self.rest, None
        if rest is not None:
            return iter(rest)
        return itertools.islice(iter(self.sampler), skip, None)

    def __len__(self):
        return len(self.sampler)


class ShardedLoader:
    """One rank's share of a DataLoader (see the module's docstring). `replace_sampler=False` (or a
    sampler of the user's own, an IterableDataset, no batch_size) keeps the user's loader as it is:
    every rank then draws from all of it."""

    def __init__(self, loader, world, replace_sampler=True):
        self._world = world
        self._epoch = 0  # epochs begun
        self._position = 0  # batches of the current epoch handed out
        self._before = 0  # samples of the current epoch trained on by another world, before this run
        self._iterating = False
        self._resume = (0, 0, world.world_size)
        self.sampler = None
        self.loader = loader
        checkpoints = world.checkpoints()
        # A sampler of the user's own (a subset, weights) is kept: its choice would be lost.
        shardable = (replace_sampler and not isinstance(loader.dataset, IterableDataset)
                     and loader.batch_size is not None and type(loader.sampler) in (SequentialSampler, RandomSampler))
        if checkpoints and loader.num_workers > 0:
            raise ValueError("nano_torch: with checkpoint_dir a set-up DataLoader needs num_workers=0 (a resumed "
                             f"run repeats its batches exactly only then), got num_workers={loader.num_workers}")
        if shardable and (world.world_size > 1 or checkpoints):
            # Seeded as Lightning's Lite seeded it: seed_everything()'s seed (PL_GLOBAL_SEED), else 0.
            self.sampler = DistributedSampler(loader.dataset, num_replicas=world.world_size, rank=world.rank,
                                              shuffle=isinstance(loader.sampler, RandomSampler),
                                              seed=int(os.environ.get("PL_GLOBAL_SEED", "0")))
            self._sampler = _Resumable(self.sampler)
            batch_size = per_rank_batch(loader.batch_size, batch_world_size(world.world_size), world.world_size)
            self.loader = DataLoader(loader.dataset, **self._settings(loader, batch_size))
        if checkpoints:
            if self.sampler is None:
                raise ValueError("nano_torch: with checkpoint_dir every set-up DataLoader needs a map-style dataset, "
                                 "a batch_size and no sampler of its own (it resumes by sample index)")
            checkpoints.loaders.append(self)

    def _settings(self, loader, batch_size):
        kwargs = dict(batch_size=batch_size, sampler=self._sampler, num_workers=loader.num_workers,
                      collate_fn=loader.collate_fn, pin_memory=loader.pin_memory, drop_last=loader.drop_last,
                      timeout=loader.timeout, worker_init_fn=loader.worker_init_fn)
        if loader.num_workers > 0:
            kwargs.update(prefetch_factor=loader.prefetch_factor, persistent_workers=loader.persistent_workers,
                          multiprocessing_context=loader.multiprocessing_context)
        return kwargs

    def position(self):
        """(epoch, samples, world): where a resumed run goes on: the epoch, how many samples of its
        order every rank together has trained on (the next epoch's start when not iterating), and
        the world size that did."""
        world = self._world.world_size
        if not self._iterating:
            return (self._epoch, 0, world)
        return (self._epoch - 1, self._before + self._position * self.loader.batch_size * world, world)

    def resume_at(self, epoch, samples, world):
        self._resume = (epoch, samples, world)

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        checkpoints = self._world.checkpointer
        if checkpoints:
            checkpoints.resume()
        epoch, self._position, self._before = self._epoch, 0, 0
        self._epoch += 1
        if epoch < self._resume[0]:
            return  # finished before the checkpoint: runs empty
        if self.sampler is not None:
            self.sampler.set_epoch(epoch)
        count = len(self.loader)
        resumed_at, samples, saved_world = self._resume
        if epoch == resumed_at and samples:
            step = self.loader.batch_size * self._world.world_size
            if saved_world == self._world.world_size and samples % step == 0:
                # The same world: each rank skips its own share, exactly as the saved run went on.
                self._position = samples // step
                self._sampler.skip = self._position * self.loader.batch_size
            else:
                self._before = samples
                self._sampler.rest = _rest_of_epoch(self.sampler, samples)
                whole, part = divmod(len(self._sampler.rest), self.loader.batch_size)
                count = whole + (1 if part and not self.loader.drop_last else 0)
        self._iterating = True
        try:
            batches = iter(self.loader)
            while True:
                # Before the fetch: a checkpoint then holds the generators that the batch's own
                # draws (an augmentation in the dataset) start from.
                if checkpoints and self._position < count:
                    checkpoints.before_batch(self)
                _timeline.data_begin()
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                self._position += 1
                batch = _model.format_batch(batch, self._world.options)
                _timeline.data_end()
                yield batch
        finally:
            self._iterating = False

    def __getattr__(self, name):
        if name == "loader":  # not set yet (a copy being made): no loader to ask
            raise AttributeError(name)
        return getattr(self.loader, name)


def setup_loader(loader, world, replace_sampler=True):
    if isinstance(loader, ShardedLoader):
        raise ValueError("nano_torch: setup_dataloaders() got a loader it set up already: pass each DataLoader once")
    if not isinstance(loader, DataLoader):
        raise TypeError(f"nano_torch: setup_dataloaders() takes torch DataLoaders, got {type(loader).__name__}")
    return ShardedLoader(loader, world, replace_sampler)
