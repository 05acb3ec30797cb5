"""Checkpoints of a Python training (TorchNano, @nano with checkpoint_dir): the models, the
optimizers with their auto_lr position, every set-up loader's epoch and position, and each rank's
random generators, taken between steps when the training loader hands out its next batch. A
restarted rank (max_restarts) resumes from the newest: finished epochs run empty and the
interrupted one goes on at the batch it stopped before, so a resumed run ends bit-identical to an
uninterrupted one (nano::TorchNano's semantics, <nano/auto_checkpoint.h>).

On disk: DIR/step-S/ (complete: renamed into place by rank 0 once every rank wrote its part),
holding state.pt (rank 0: models, optimizers) and rank-R.pt (each rank: generators, loaders)."""
import os
import random
import shutil
import time

import torch
import torch.distributed as dist

_PREFIX = "step-"


def _generators():
    state = {"torch": torch.get_rng_state(), "random": random.getstate()}
    try:
        import numpy
        state["numpy"] = numpy.random.get_state()
    except ImportError:
        pass
    return state


def _set_generators(state):
    torch.set_rng_state(state["torch"])
    random.setstate(state["random"])
    if "numpy" in state:
        import numpy
        numpy.random.set_state(state["numpy"])


def _save(obj, path):
    with open(path, "wb") as f:
        torch.save(obj, f)
        f.flush()
        os.fsync(f.fileno())


def newest(folder):
    """Pure over the folder's names: the newest complete checkpoint's path, or None."""
    steps = [int(n[len(_PREFIX):]) for n in os.listdir(folder) if n.startswith(_PREFIX)
             and n[len(_PREFIX):].isdigit()] if os.path.isdir(folder) else []
    return os.path.join(folder, f"{_PREFIX}{max(steps)}") if steps else None


class Checkpointer:
    """One rank's checkpoints. Models, optimizers and loaders register in the order the training
    sets them up (the same in every run); the first loader is the training loader, whose batches
    count the steps."""

    def __init__(self, world, settings):
        self._world = world
        self._dir = settings["dir"]
        self._every_steps = settings["every_steps"]
        self._every_seconds = settings["every_seconds"]
        self._keep = settings["keep"]
        self.models, self.optimizers, self.loaders = [], [], []
        self.steps = 0
        self._resumed = False
        self._generators = None  # a resumed rank's, set when the training loader hands out its first batch
        self._last = time.monotonic()
        os.makedirs(self._dir, exist_ok=True)

    # ---- between steps ----
    def before_batch(self, loader):
        """Called by every loader before it hands out a batch; the training loader's count steps
        and may take a checkpoint first (every rank reaches the same step: the steps are in lockstep)."""
        self.resume()
        if not self.loaders or loader is not self.loaders[0]:
            return
        if self._generators is not None:
            # Here, not at resume(): the uninterrupted run saved them at this point, after the
            # epoch's iterator had drawn its seed from them.
            _set_generators(self._generators)
            self._generators = None
            return
        if self.steps > 0 and self._due():
            self.save()
        self.steps += 1

    def _due(self):
        due = self._every_steps > 0 and self.steps % self._every_steps == 0
        if self._every_seconds > 0:
            # Rank 0's clock decides, so every rank takes the same checkpoint.
            late = torch.tensor([1 if time.monotonic() - self._last >= self._every_seconds else 0])
            if self._world.distributed:
                dist.broadcast(late, 0)
            due = due or bool(late.item())
        return due

    def save(self):
        rank, step = self._world.rank, self.steps
        part = os.path.join(self._dir, f".{_PREFIX}{step}")
        if rank == 0:
            shutil.rmtree(part, ignore_errors=True)
            os.makedirs(part)
        self._barrier()
        if rank == 0:
            _save({"steps": step, "models": [m.state_dict() for m in self.models],
                   "optimizers": [o.state_dict() for o in self.optimizers],
                   "auto_lr": [getattr(o, "_nano_auto_lr_state", None) for o in self.optimizers]},
                  os.path.join(part, "state.pt"))
        _save({"generators": _generators(), "loaders": [loader.position() for loader in self.loaders]},
              os.path.join(part, f"rank-{rank}.pt"))
        self._barrier()
        if rank == 0:
            os.replace(part, os.path.join(self._dir, f"{_PREFIX}{step}"))
            kept = sorted((int(n[len(_PREFIX):]) for n in os.listdir(self._dir)
                           if n.startswith(_PREFIX) and n[len(_PREFIX):].isdigit()), reverse=True)
            for old in kept[self._keep:]:
                shutil.rmtree(os.path.join(self._dir, f"{_PREFIX}{old}"), ignore_errors=True)
        self._last = time.monotonic()

    def _barrier(self):
        if self._world.distributed:
            dist.barrier()

    # ---- resuming ----
    def resume(self):
        """Once, at the first batch: the newest checkpoint into every registered object."""
        if self._resumed:
            return
        self._resumed = True
        if self._world.rank == 0:  # parts of a checkpoint that a killed attempt did not finish
            for name in os.listdir(self._dir):
                if name.startswith("." + _PREFIX):
                    shutil.rmtree(os.path.join(self._dir, name), ignore_errors=True)
        path = newest(self._dir)
        if path is None:
            return
        # Our own files, with generators and positions beside tensors: not weights only (torch 2.6's default).
        state = torch.load(os.path.join(path, "state.pt"), weights_only=False)
        mine = torch.load(os.path.join(path, f"rank-{self._world.rank}.pt"), weights_only=False)
        if len(state["models"]) != len(self.models) or len(mine["loaders"]) != len(self.loaders):
            raise RuntimeError(f"nano_torch: the checkpoint {path} holds {len(state['models'])} models and "
                               f"{len(mine['loaders'])} loaders, this training set up {len(self.models)} and "
                               f"{len(self.loaders)}")
        for model, saved in zip(self.models, state["models"]):
            model.load_state_dict(saved)
        for optimizer, saved, auto_lr in zip(self.optimizers, state["optimizers"], state["auto_lr"]):
            optimizer.load_state_dict(saved)
            if auto_lr is not None:
                optimizer._nano_auto_lr_state.update(auto_lr)
        for loader, position in zip(self.loaders, mine["loaders"]):
            loader.resume_at(*position)
        self._generators = mine["generators"]
        self.steps = state["steps"] + 1  # counting the batch the resumed loader hands out first
        if self._world.rank == 0:
            print(f"nano_torch: resumed from {path} (step {state['steps']})", flush=True)
