"""Checkpoints of a Python training (TorchNano, @nano with checkpoint_dir): the models, the
optimizers with their auto_lr position, every set-up loader's epoch and position, and each rank's
random generators, taken between steps when the training loader hands out its next batch. A
restarted rank (max_restarts) resumes from the newest checkpoint that verifies: finished epochs
run empty and the interrupted one goes on at the batch it stopped before, so a resumed run ends
bit-identical to an uninterrupted one (nano::TorchNano's semantics, <nano/auto_checkpoint.h>).

On disk: DIR/step-S/ (complete: renamed into place by rank 0 once every rank wrote its part),
holding state.pt (rank 0: models, optimizers), rank-R.pt (each rank: generators, loaders) and
manifest.json: every file's size and SHA-256, sealed (HMAC-SHA256) with the folder's key
DIR/.nano-key (32 random bytes, made once, 0600, this user's own). A checkpoint verifies when its
seal and every file's size and hash hold; only one that verifies is ever unpickled (with
torch.load's weights_only where the installed torch loads these files that way), counts toward
`keep`, or is deleted by pruning; one that does not is named in one line and left in place. The
folder has one live owner (the C++ API's claim, runtime/folder_claim/folder_claim.h): rank 0 checks it before
every checkpoint and every prune, and a job that lost it ends naming the folder."""
import hashlib
import hmac
import io
import json
import os
import random
import shutil
import stat
import time

import torch
import torch.distributed as dist

from . import _tensor_wire

_PREFIX = "step-"
_KEY = ".nano-key"
_MANIFEST = "manifest.json"
_FORMAT = "nano_torch-checkpoint 1"


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


def _weights_only():
    """Whether this torch loads these files with weights_only=True (torch 1.13's cannot: it
    refuses floats, which every optimizer state holds). Either way a file is loaded only once its
    seal verified."""
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


def _private_open(path, flags, mode=0o600):
    """Never through a link; a read never blocks (a FIFO planted at a file's name is refused
    by the caller's check that it is a regular file)."""
    extra = os.O_NONBLOCK if flags & os.O_ACCMODE == os.O_RDONLY else 0
    return os.open(path, flags | extra | os.O_NOFOLLOW | os.O_CLOEXEC, mode)


def _read_regular(path, limit):
    """The bytes of plain file `path` if it has at most `limit` of them, never through a link;
    None otherwise."""
    try:
        fd = _private_open(path, os.O_RDONLY)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        data = f.read(limit + 1)
    return data if len(data) <= limit else None


def folder_key(folder, create):
    """The folder's key (bytes): made by the first writer (O_EXCL, 0600), read by everyone after;
    one that another user made, or others may read, is refused. None when there is none yet and
    `create` is false."""
    path = os.path.join(folder, _KEY)
    if create:
        try:
            fd = _private_open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            with os.fdopen(fd, "w") as f:
                f.write(os.urandom(32).hex())
                f.flush()
                os.fsync(f.fileno())
        except FileExistsError:
            pass
    try:
        fd = _private_open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise RuntimeError(f"nano_torch: cannot read the checkpoint folder's key {path}: {e.strerror}") from None
    with os.fdopen(fd) as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise RuntimeError(f"nano_torch: the checkpoint folder's key {path} is not this user's private file "
                               f"(owner uid {st.st_uid}, mode {stat.filemode(st.st_mode)}): refusing the folder")
        try:
            key = bytes.fromhex(f.read(65).strip())
        except ValueError:
            key = b""
    if len(key) != 32:
        raise RuntimeError(f"nano_torch: the checkpoint folder's key {path} is damaged")
    return key


def _seal(key, manifest):
    body = json.dumps({k: v for k, v in manifest.items() if k != "mac"}, sort_keys=True).encode()
    return hmac.new(key, b"checkpoint\0" + body, hashlib.sha256).hexdigest()


def manifest_of(folder, key):
    """(manifest, "") for checkpoint `folder` when its manifest's seal verifies, else (None, why)."""
    if key is None:
        return None, "no key in the checkpoint folder to check it with"
    text = _read_regular(os.path.join(folder, _MANIFEST), 1 << 20)
    if text is None:
        return None, "no manifest (not written by this nano_torch)"
    try:
        manifest = json.loads(text)
        sealed = hmac.compare_digest(str(manifest["mac"]), _seal(key, manifest))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, "its manifest is damaged"
    if manifest.get("format") != _FORMAT or not sealed:
        return None, "its manifest's seal does not verify (not made by a job of this folder)"
    # Sealed by this folder's key: what it says was written by a job of this folder.
    if not isinstance(manifest.get("files"), dict) or not isinstance(manifest.get("world"), int) or manifest["world"] < 1:
        return None, "its manifest is damaged"
    return manifest, ""


def read_verified(folder, manifest, name):
    """The bytes of file `name` of checkpoint `folder` when they are what its verified manifest
    says (size and SHA-256), read once, so that what was checked is what is loaded; None otherwise."""
    entry = manifest["files"].get(name)
    if not isinstance(entry, list) or len(entry) != 2 or not isinstance(entry[0], int) or entry[0] < 0:
        return None
    data = _read_regular(os.path.join(folder, name), entry[0])
    if data is None or len(data) != entry[0] or hashlib.sha256(data).hexdigest() != entry[1]:
        return None
    return data


def why_not(folder, key, names=None):
    """Why checkpoint `folder` does not verify ("" when it does), checking the files `names` (all
    of the manifest's when None). Pure but for reading the folder."""
    manifest, why = manifest_of(folder, key)
    if manifest is None:
        return why
    for name in names if names is not None else manifest["files"]:
        if name not in manifest["files"]:
            return f"it has no {name}"
        if read_verified(folder, manifest, name) is None:
            return f"{name} is damaged or missing"
    return ""


def checked_keep(keep):
    """`keep` when it is a whole number of at least 1; otherwise a ValueError naming the option."""
    if not isinstance(keep, int) or keep < 1:
        raise ValueError(f"nano_torch: checkpoint_keep must be at least 1, got {keep!r}")
    return keep


def prune(steps, keep):
    """Pure: of {step: verified}, the steps to delete so that the `keep` newest verified ones stay;
    a checkpoint that did not verify never counts and is never deleted (as the C++ API's)."""
    checked_keep(keep)
    newer, out = 0, []
    for step in sorted(steps, reverse=True):
        if not steps[step]:
            continue
        if newer >= keep:
            out.append(step)
        newer += 1
    return out


def _steps(folder):
    """The steps of the folder's checkpoints, newest first ("step-S", S plain ASCII digits)."""
    return sorted((int(n[len(_PREFIX):]) for n in os.listdir(folder)
                   if n.startswith(_PREFIX) and n[len(_PREFIX):].isascii() and n[len(_PREFIX):].isdigit()),
                  reverse=True)


class _HashingWriter:
    """A file object that hashes what torch.save writes through it."""

    def __init__(self, f):
        self._f, self.digest, self.size = f, hashlib.sha256(), 0

    def write(self, data):
        self.digest.update(data)
        self.size += len(data)
        return self._f.write(data)

    def flush(self):
        self._f.flush()


def _save(obj, path):
    """`obj` into a new file `path` (O_EXCL, 0600, fsynced); its (size, sha256)."""
    fd = _private_open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    with os.fdopen(fd, "wb") as f:
        writer = _HashingWriter(f)
        torch.save(obj, writer)
        f.flush()
        os.fsync(f.fileno())
    return writer.size, writer.digest.hexdigest()


def _sync_folder(folder):
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Checkpointer:
    """One rank's checkpoints. Models, optimizers and loaders register in the order the training
    sets them up (the same in every run); the first loader is the training loader, whose batches
    count the steps."""

    def __init__(self, world, settings):
        self._world = world
        self._dir = settings["dir"]
        self._every_steps = settings["every_steps"]
        self._every_seconds = settings["every_seconds"]
        self._keep = checked_keep(settings["keep"])
        self.models, self.optimizers, self.loaders = [], [], []
        self.steps = 0
        self._resumed = False
        self._generators = None  # a resumed rank's, set when the training loader hands out its first batch
        self._last = time.monotonic()
        self._verified = {}  # step -> (identity of its manifest, verdict): each folder hashed once
        self._claim = None
        os.makedirs(self._dir, exist_ok=True)
        if world.rank == 0:
            from . import _C
            if hasattr(_C, "FolderClaim"):  # not in the build for a pip torch alone
                self._claim = _C.FolderClaim(self._dir)  # the launching caller's, or this job's own
            self._key = folder_key(self._dir, create=True)
        self._barrier()
        if world.rank != 0:
            self._key = folder_key(self._dir, create=False)
            if self._key is None:
                raise RuntimeError(f"nano_torch: rank {world.rank} finds no {_KEY} in checkpoint folder {self._dir}, "
                                   "which rank 0 made: every rank must see the checkpoint folder")

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

    def _check_claim(self):
        if self._claim is not None:
            self._claim.check()  # RuntimeError naming the folder once another job took it

    def save(self):
        rank, step = self._world.rank, self.steps
        part = os.path.join(self._dir, f".{_PREFIX}{step}-{os.urandom(8).hex()}") if rank == 0 else None
        if rank == 0:
            self._check_claim()
            os.mkdir(part, 0o700)
        part = self._share(part)
        files = {}
        if rank == 0:
            files["state.pt"] = _save({"steps": step, "models": [m.state_dict() for m in self.models],
                                       "optimizers": [o.state_dict() for o in self.optimizers],
                                       "auto_lr": [o.warmup_state() for o in self.optimizers]},
                                      os.path.join(part, "state.pt"))
        files[f"rank-{rank}.pt"] = _save({"generators": _generators(),
                                          "loaders": [loader.position() for loader in self.loaders]},
                                         os.path.join(part, f"rank-{rank}.pt"))
        if rank == 0:
            manifest_files = {name: list(v) for name, v in files.items()}
        if self._world.distributed:  # each rank's (size, hash), as bytes: nothing crossing hosts is unpickled
            size, digest = files[f"rank-{rank}.pt"]
            every = _tensor_wire.all_gather_fixed(size.to_bytes(8, "little") + bytes.fromhex(digest),
                                                  self._world.world_size)
            if rank == 0:
                for r, item in enumerate(every):
                    manifest_files[f"rank-{r}.pt"] = [int.from_bytes(item[:8], "little"), item[8:].hex()]
        if rank == 0:
            manifest = {"format": _FORMAT, "step": step, "world": self._world.world_size, "files": manifest_files}
            manifest["mac"] = _seal(self._key, manifest)
            fd = _private_open(os.path.join(part, _MANIFEST), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            with os.fdopen(fd, "w") as f:
                json.dump(manifest, f)
                f.flush()
                os.fsync(f.fileno())
            _sync_folder(part)
            self._check_claim()
            final = os.path.join(self._dir, f"{_PREFIX}{step}")
            if self._set_aside_if_damaged(step):
                os.replace(part, final)
            else:  # a whole checkpoint of this step is there already (a resumed run): it stays
                shutil.rmtree(part)
            _sync_folder(self._dir)  # the new checkpoint lasts a crash before any old one goes
            self._verified[step] = (self._identity(step), "")
            self._prune()
        self._barrier()
        self._last = time.monotonic()

    def _set_aside_if_damaged(self, step):
        """Whether the step's name is free for the new checkpoint. A damaged checkpoint of that step
        (a resumed run saving it again) is renamed aside, said in one line, never replaced unseen;
        a whole one stays (False)."""
        final = os.path.join(self._dir, f"{_PREFIX}{step}")
        if not os.path.lexists(final):
            return True
        why = self._verdict(step)
        if not why:
            return False
        aside = f"{final}.damaged-{os.urandom(4).hex()}"
        os.rename(final, aside)
        self._verified.pop(step, None)
        print(f"nano_torch: checkpoint {final} is damaged ({why}): kept as {aside}, and this run's checkpoint of "
              "that step written in its place", flush=True)
        return True

    def _identity(self, step):
        try:
            st = os.lstat(os.path.join(self._dir, f"{_PREFIX}{step}", _MANIFEST))
            return st.st_ino, st.st_size, st.st_mtime_ns
        except OSError:
            return None

    def _verdict(self, step):
        """Why step-S does not verify ("" when it does), hashed once while it stays the same."""
        identity = self._identity(step)
        known = self._verified.get(step)
        if known is None or known[0] != identity:
            known = (identity, why_not(os.path.join(self._dir, f"{_PREFIX}{step}"), self._key))
            self._verified[step] = known
        return known[1]

    def _prune(self):
        old = prune({s: self._verdict(s) == "" for s in _steps(self._dir)}, self._keep)
        if old:
            self._check_claim()
            for s in old:
                shutil.rmtree(os.path.join(self._dir, f"{_PREFIX}{s}"), ignore_errors=True)
                self._verified.pop(s, None)
            _sync_folder(self._dir)

    def _share(self, path):
        """Rank 0's `path` (a folder in the shared checkpoint folder) on every rank."""
        if not self._world.distributed:
            return path
        return _tensor_wire.broadcast_bytes(path.encode() if path is not None else None, 0).decode()

    def _barrier(self):
        if self._world.distributed:
            dist.barrier()

    # ---- resuming ----
    def resume(self):
        """Once, at the first batch: the newest checkpoint that verifies on every rank into every
        registered object; the damaged ones are named in one line and left in place. Every rank
        walks rank 0's list of steps, so all agree on which one."""
        if self._resumed:
            return
        self._resumed = True
        rank = self._world.rank
        if rank == 0:  # parts of a checkpoint that a killed attempt did not finish: ours, unsealed
            for name in os.listdir(self._dir):
                if name.startswith("." + _PREFIX):
                    shutil.rmtree(os.path.join(self._dir, name), ignore_errors=True)
        steps = _steps(self._dir) if rank == 0 else None
        if self._world.distributed:
            text = _tensor_wire.broadcast_bytes(",".join(map(str, steps)).encode() if rank == 0 else None, 0)
            steps = [int(s) for s in text.decode().split(",") if s]
        damaged, chosen = [], None
        for step in steps:
            path = os.path.join(self._dir, f"{_PREFIX}{step}")
            # Rank 0 checks every file of the checkpoint (it judges pruning); each rank the ones it
            # loads, read once: what is checked is what is loaded.
            why = self._verdict(step) if rank == 0 else ""
            manifest, manifest_why = manifest_of(path, self._key)
            loaded = None
            if not why:
                why = manifest_why
            if not why and manifest["world"] != self._world.world_size:
                # A whole checkpoint of another world: refused in one line, not trained over from 0.
                raise RuntimeError(f"nano_torch: checkpoint {path} was written by {manifest['world']} ranks and this "
                                   f"run has {self._world.world_size}: resume with {manifest['world']}, or use another "
                                   "checkpoint_dir")
            if not why:
                loaded = [read_verified(path, manifest, name) for name in ("state.pt", f"rank-{rank}.pt")]
                if any(data is None for data in loaded):
                    why = "a file of it is damaged or missing"
            ok = torch.tensor([0 if why else 1])
            if self._world.distributed:
                dist.all_reduce(ok, op=dist.ReduceOp.MIN)
            if ok.item():
                chosen = (path, loaded)
                break
            if rank == 0:
                why = why or "damaged on another rank"
                self._verified[step] = (self._identity(step), why)  # never counted, never pruned
                damaged.append(f"{_PREFIX}{step} ({why})")
        if rank == 0 and damaged:
            print(f"nano_torch: {len(damaged)} damaged checkpoint{'s' if len(damaged) > 1 else ''} in {self._dir}, left "
                  f"in place and never counted as kept: {', '.join(damaged)}", flush=True)
        if chosen is None:
            return
        path, (state_bytes, rank_bytes) = chosen
        state = torch.load(io.BytesIO(state_bytes), weights_only=_weights_only())
        saved = torch.load(io.BytesIO(rank_bytes), weights_only=_weights_only())
        del state_bytes, rank_bytes
        held = (len(state["models"]), len(state["optimizers"]), len(saved["loaders"]))
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
        for loader, position in zip(self.loaders, saved["loaders"]):
            loader.resume_at(*position)
        self._generators = saved["generators"]
        self.steps = state["steps"] + 1  # counting the batch the resumed loader hands out first
        if rank == 0:
            print(f"nano_torch: resumed from {path} (step {state['steps']})", flush=True)
