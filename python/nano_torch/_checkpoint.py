"""Checkpoints of a Python training (TorchNano, @nano with checkpoint_dir): the models, the
optimizers with their auto_lr position, every set-up loader's epoch and position, and each rank's
random generators, taken between steps when the training loader hands out its next batch. A
restarted rank (max_restarts) resumes from the newest checkpoint that verifies: finished epochs
run empty and the interrupted one goes on at the sample it stopped before, so a resumed run ends
bit-identical to an uninterrupted one of the same world (nano::TorchNano's semantics,
<nano/auto_checkpoint.h>).

The files are nano's one checkpoint engine's (the extension's CheckpointFolder,
runtime/checkpoint_files/checkpoint_folder.h): this module hands it what torch.save writes and gets
back a payload whose seal verified, and nothing else here knows the format, the key, which files
count or which go. Rank 0 writes one file per checkpoint: torch.save of the shared state (models,
optimizers, auto_lr, loaders) and of every rank's part (its generators, as the bytes that rank's
torch.save made), gathered as bytes (nothing crossing hosts is unpickled). Only a payload whose
seal verified under the folder's key is ever unpickled (with torch.load's weights_only where the
installed torch loads these files that way).

A checkpoint of N ranks resumes on M: the shared state is the same on every rank; rank r takes
saved rank r mod N's generators, and each loader deals the rest of the interrupted epoch anew
over the M ranks. Under nano-run --rejoin a host that comes back stops every rank at the next
checkpoint once it is on disk, and the grown world resumes from it."""
import io
import random
import sys
import time

import torch
import torch.distributed as dist

from . import _C, _tensor_wire


def _generators():
    state = {"torch": torch.get_rng_state(), "random": random.getstate()}
    try:
        import numpy
        name, keys, pos, has_gauss, cached = numpy.random.get_state()
        state["numpy"] = (name, keys.tolist(), pos, has_gauss, cached)  # plain values: weights_only loads them
    except ImportError:
        pass
    return state


def _set_generators(state):
    torch.set_rng_state(state["torch"])
    random.setstate(state["random"])
    if "numpy" in state:
        import numpy
        name, keys, pos, has_gauss, cached = state["numpy"]
        numpy.random.set_state((name, numpy.array(keys, dtype=numpy.uint32), pos, has_gauss, cached))


_WEIGHTS_ONLY = None


def weights_only():
    """Whether this torch loads these files with weights_only=True (torch 1.13's cannot: it
    refuses floats, which every optimizer state holds). Either way a payload is loaded only once
    its seal verified."""
    global _WEIGHTS_ONLY
    if _WEIGHTS_ONLY is None:
        buffer = io.BytesIO()
        torch.save({"lr": 0.5, "state": (1, [2], None, "x", torch.zeros(1))}, buffer)
        buffer.seek(0)
        try:
            torch.load(buffer, weights_only=True)
            _WEIGHTS_ONLY = True
        except Exception:  # noqa: BLE001 - any refusal means: not usable here
            _WEIGHTS_ONLY = False
    return _WEIGHTS_ONLY


def _load(file):
    return torch.load(file, weights_only=weights_only())


def _dumps(obj):
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer


class _Payload(io.RawIOBase):
    """A checkpoint's payload as a read-only file (offset 0 its first byte), read through the
    descriptor its seal was checked through; a read returns only bytes whose chunks verified (each
    checked on the other cores while the ones before it are read): what was checked is what is
    loaded."""

    def __init__(self, engine_payload):
        super().__init__()
        self._payload, self._size, self._at = engine_payload, engine_payload.bytes, 0

    def readable(self):
        return True

    def seekable(self):
        return True

    def readinto(self, buffer):
        n = max(0, min(len(buffer), self._size - self._at))
        got = self._payload.read_into(self._at, memoryview(buffer).cast("B")[:n]) if n else 0
        self._at += got
        return got

    def seek(self, offset, whence=io.SEEK_SET):
        self._at = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self._size}[whence] + offset
        return self._at

    def tell(self):
        return self._at

    def load(self):
        """torch.load of the whole payload, once every chunk verified: (state, "") or, when a chunk
        did not verify, (None, which one)."""
        try:
            state = _load(self)
            self._payload.wait_verified()
            return state, ""
        except Exception:  # noqa: BLE001 - torch.load wraps what a read raised: the engine says if it was that
            try:  # every chunk checked first: each rank calls the same bytes damaged or not
                self._payload.wait_verified()
            except RuntimeError:
                pass
            why = self._payload.why_damaged()
            if why:
                return None, why
            raise

    def close(self):
        if not self.closed:
            self._payload.close()
        super().close()


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
        _C.check_checkpoint_settings(self._every_steps, self._every_seconds, self._keep)
        shared = settings.get("shared", False)
        self.models, self.optimizers, self.loaders = [], [], []
        self.steps = 0
        self._resumed = False
        self._generators = None  # a resumed rank's, set when the training loader hands out its first batch
        self._last = time.monotonic()
        self._claim = None
        self._stops = _C.planned_stops_on()  # installs the ask's handler before a loader's threads start
        if world.rank == 0:
            self._claim = _C.FolderClaim(self._dir)  # the launching caller's, or this job's own
            self._folder = _C.CheckpointFolder(self._dir, True, shared)  # made 0700, with its key
            self._folder.remove_temporaries()
        self._barrier()
        if world.rank != 0:
            try:
                self._folder = _C.CheckpointFolder(self._dir, False, shared)
            except (ValueError, RuntimeError) as e:
                raise RuntimeError(f"nano_torch: rank {world.rank}: {e}") from None

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
        rank, step, world_size = self._world.rank, self.steps, self._world.world_size
        part = _dumps({"generators": _generators()}).getvalue()
        parts = _tensor_wire.all_gather_bytes(part, world_size) if self._world.distributed else [part]
        written = torch.tensor([0])
        if rank == 0:
            self._claim.check()  # RuntimeError naming the folder once another job took it
            state = {"steps": step, "world": world_size, "models": [m.state_dict() for m in self.models],
                     "optimizers": [o.state_dict() for o in self.optimizers],
                     "auto_lr": [o.warmup_state() for o in self.optimizers],
                     "loaders": [loader.position() for loader in self.loaders],
                     "ranks": [torch.frombuffer(bytearray(p), dtype=torch.uint8) for p in parts]}
            writer = self._folder.start(step, world_size, torch.__version__)
            try:
                torch.save(state, writer)  # straight into the engine's file: no copy in memory
                writer.finish()
                written[0] = 1
            except RuntimeError as e:  # a full disk: the previous checkpoints stay, training goes on
                print(f"{e}; the previous checkpoints are kept and training goes on", file=sys.stderr, flush=True)
            finally:
                writer.abort()  # whatever failed (a state that cannot be pickled): no temporary left
            del state, writer
            if written.item():
                self._folder.prune(self._keep, self._claim)
        if self._world.distributed:
            dist.broadcast(written, 0)  # also every rank's wait for the write
        self._last = time.monotonic()
        if self._stops:
            self._stop_if_asked(bool(written.item()))

    def _stop_if_asked(self, written):
        """The planned stop (nano-run --rejoin): once any rank was asked, every rank stops at this
        checkpoint if it is on disk, and the world grows again at this step."""
        asked = torch.tensor([1 if _C.stop_asked() else 0])
        if self._world.distributed:
            dist.all_reduce(asked)
        if not asked.item():
            return
        if not written:
            if self._world.rank == 0:
                print(f"nano_torch: not stopping at step {self.steps} as nano-run asked: its checkpoint was not "
                      "written", file=sys.stderr, flush=True)
            return
        if self._world.rank == 0:
            print(f"nano_torch: stopping at the checkpoint of step {self.steps}, as nano-run asked: the world "
                  "changes at this step", file=sys.stderr, flush=True)
        sys.stdout.flush()
        sys.stderr.flush()
        _C.stop_at_checkpoint()

    def _barrier(self):
        if self._world.distributed:
            dist.barrier()

    # ---- resuming ----
    def resume(self):
        """Once, at the first batch: the newest checkpoint that verifies (rank 0's choice, read and
        verified by every rank as it loads it) into every registered object; what does not count is
        named in one line and left in place, and a file found damaged as it was loaded is named and
        passed over for the one before it."""
        if self._resumed:
            return
        self._resumed = True
        while True:
            name, seal = self._chosen()
            if not name:
                return
            state, damaged = self._read(name, seal)
            if not self._anyone_damaged(damaged):
                break
            state = None  # not held while the one before it loads
            if self._world.rank == 0:
                self._folder.damaged(name, damaged or "a chunk did not verify on another rank")
        self._apply(name, state)

    def _chosen(self):
        """Rank 0's choice, told to every rank: the checkpoint's name ("" for a fresh start) and seal."""
        rank = self._world.rank
        choice = self._folder.choose() if rank == 0 else None
        # The name and seal, or why the folder is refused ("!" first), as bytes.
        text = (("!" + choice["refused"]) if choice["refused"] else f"{choice['name']}\0{choice['seal']}") \
            if rank == 0 else None
        if self._world.distributed:
            text = _tensor_wire.broadcast_bytes(text.encode() if rank == 0 else None, 0).decode()
        if text.startswith("!"):
            raise RuntimeError(text[1:] if rank == 0 else
                               f"nano_torch: rank 0 refused checkpoint folder {self._dir} (its line says why)")
        name, seal = text.split("\0")
        return name, seal

    def _read(self, name, seal):
        """Checkpoint `name` loaded as its chunks verify: (state, "") or (None, the damaged chunk)."""
        try:
            payload = _Payload(self._folder.open_verified(name, seal))
        except RuntimeError as e:
            raise RuntimeError(f"nano_torch: rank {self._world.rank}: {e} (every rank must see the checkpoint "
                               "folder)") from None
        with payload:
            return payload.load()

    def _anyone_damaged(self, damaged):
        flag = torch.tensor([1 if damaged else 0])
        if self._world.distributed:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def _apply(self, name, state):
        rank = self._world.rank
        saved_world = int(state["world"])
        saved = _load(io.BytesIO(state["ranks"][rank % saved_world].numpy().tobytes()))
        path = f"{self._dir}/{name}"
        held = (len(state["models"]), len(state["optimizers"]), len(state["loaders"]))
        if held != (len(self.models), len(self.optimizers), len(self.loaders)):
            raise RuntimeError(f"nano_torch: the checkpoint {path} holds {held[0]} models, {held[1]} optimizers and "
                               f"{held[2]} loaders, this training set up {len(self.models)}, {len(self.optimizers)} "
                               f"and {len(self.loaders)}")
        for model, model_state in zip(self.models, state["models"]):
            model.load_state_dict(model_state)
        for optimizer, optimizer_state, auto_lr in zip(self.optimizers, state["optimizers"], state["auto_lr"]):
            optimizer.load_state_dict(optimizer_state)
            if auto_lr is not None:
                optimizer.load_warmup_state(auto_lr)
        for loader, position in zip(self.loaders, state["loaders"]):
            loader.resume_at(*position)
        self._generators = saved["generators"]
        self.steps = state["steps"] + 1  # counting the batch the resumed loader hands out first
        if rank == 0:
            other = f", written by {saved_world} ranks, this run has {self._world.world_size}" \
                if saved_world != self._world.world_size else ""
            print(f"nano_torch: resumed from {path} (step {state['steps']}{other})", flush=True)
