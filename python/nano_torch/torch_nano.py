"""BigDL-Nano's Python API on nano: the TorchNano class (BigDL-Nano 2.4's, a LightningLite 1.6
subclass) and the @nano decorator (_decorator.py).

    from nano_torch import TorchNano, nano

    class MyNano(TorchNano):
        def train(self):
            model, optimizer, loader = self.setup(model, optimizer, loader)
            ...
            self.backward(loss)

    MyNano(num_processes=2).train()      # rank 0's return value

Each call runs its training in num_processes ranks started, pinned and supervised by nano's
launcher (the one nano-run uses), the training shipped by value (cloudpickle), so functions and
classes of __main__, of standard input and of notebooks work. Afterwards the caller's models and
optimizers hold rank 0's trained state. num_processes=1 trains in the calling process. Under
nano-run, torchrun or mpirun a call joins that world instead of launching one."""
import functools
import os
import random

import torch
import torch.distributed as dist

from . import _checkpoint, _handoff, _ipex, _launch, _loader, _model, _options, _setup
from ._decorator import nano  # noqa: F401 - nano_torch.torch_nano.nano, where it was

RankFailedError = _launch.RankFailedError


class TorchNano:
    """BigDL-Nano's TorchNano: subclass it, write train() with self.setup() and self.backward(),
    and call train() on an instance. The keywords are BigDL-Nano's, LightningLite's (accelerator,
    strategy, devices, num_nodes, plugins, gpus, tpu_cores: what a CPU job can do) and nano's own
    (docs/python-api.md)."""

    def __init__(self, num_processes=None, use_ipex=False, distributed_backend="subprocess", process_group_backend=None,
                 precision=32, cpu_for_each_process=None, channels_last=False, auto_lr=True, *args, **kwargs):
        options = _options.options_of(num_processes, use_ipex, distributed_backend, process_group_backend, precision,
                                      cpu_for_each_process, channels_last, auto_lr, lite_args=args, **kwargs)
        _options.tell(options.notes)
        self._nano_options = options
        self._nano_world = None
        # BigDL-Nano's attributes, as it set them
        self.num_processes = options.num_processes
        self.use_ipex = use_ipex
        self.dtype = _ipex.dtype(options)
        self.cpu_for_each_process = cpu_for_each_process
        self.channels_last = channels_last
        self.auto_lr = auto_lr

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "train" in cls.__dict__ and not getattr(cls.__dict__["train"], "_nano_launching", False):
            cls.train = _launching(cls.__dict__["train"])

    def train(self, *args, **kwargs):
        """The training; override it. It runs in every rank."""
        raise NotImplementedError("nano_torch: a TorchNano subclass defines train()")

    def run(self, *args, **kwargs):
        """LightningLite's entry point, which BigDL-Nano kept only for compatibility: does nothing."""

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_nano_world"] = None  # a world belongs to one process
        return state

    # ---- where this process is (Lightning's properties): in train() the rank's, outside it this
    # process's own (an outer launcher's rank, or the caller alone) ----
    def _here(self):
        if self._nano_world is not None:
            return self._nano_world
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            return _setup.world_from_environment(self._nano_options)
        return _setup.single_world(self._nano_options)

    @property
    def global_rank(self):
        return self._here().rank

    @property
    def local_rank(self):
        return self._here().local_rank

    @property
    def node_rank(self):
        return self._here().node_rank

    @property
    def world_size(self):
        return self._here().world_size

    @property
    def is_global_zero(self):
        return self._here().rank == 0

    @property
    def device(self):
        """The device the ranks train on: the CPU."""
        return torch.device("cpu")

    @property
    def _world(self):
        if self._nano_world is None:
            raise RuntimeError("nano_torch: TorchNano's setup() and setup_dataloaders() work inside train()")
        return self._nano_world

    # ---- inside train() ----
    def setup(self, model, optimizer, *dataloaders, move_to_device=True):
        """The model in DDP (and the precision, memory format), the optimizer(s) with auto_lr,
        each loader sharded: (model, optimizer) or (model, optimizer, loader) or
        (model, optimizer, [loaders]); optimizer may be a list, and comes back as one.
        move_to_device: accepted as Lightning's; the model stays on the CPU either way."""
        many = not isinstance(optimizer, torch.optim.Optimizer)
        optimizers = list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer]
        if not all(isinstance(o, torch.optim.Optimizer) for o in optimizers):
            raise TypeError(f"nano_torch: setup() takes a torch optimizer or a list of them, got {optimizer!r}")
        wrapped, optimizers = _setup.setup(model, optimizers, self._world)
        out_optimizer = optimizers if many else optimizers[0]
        if not dataloaders:
            return wrapped, out_optimizer
        return wrapped, out_optimizer, self.setup_dataloaders(*dataloaders, move_to_device=move_to_device)

    def setup_dataloaders(self, *dataloaders, replace_sampler=True, move_to_device=True):
        """Each loader sharded across the ranks; one loader, or a list of them. replace_sampler=False
        keeps a loader as it is (every rank draws from all of it); move_to_device: accepted, the
        batches are on the CPU."""
        loaders = [_loader.setup_loader(d, self._world, replace_sampler) for d in dataloaders]
        return loaders[0] if len(loaders) == 1 else loaders

    def backward(self, tensor, *args, model=None, **kwargs):
        """loss.backward(); model= (Lightning's, for DeepSpeed) is accepted and needs nothing here."""
        tensor.backward(*args, **kwargs)

    def autocast(self):
        """The context of the options' precision (CPU autocast to bfloat16 for "bf16")."""
        return _model.autocast(self._nano_options)

    def to_device(self, obj):
        """`obj` (a module, a tensor or a collection of tensors) on the CPU, where the ranks train."""
        if isinstance(obj, torch.nn.Module):
            return obj.to(self.device)
        return _model.apply_to_tensors(obj, lambda t: t.to(self.device))

    def print(self, *args, **kwargs):
        """print() on the first rank of each host (Lightning's: local rank 0)."""
        if self.local_rank == 0:
            print(*args, **kwargs)

    def barrier(self, name=None):
        if self._here().distributed:
            dist.barrier()

    def all_gather(self, data, group=None, sync_grads=False):
        """Every rank's `data` (a tensor, a number, or a collection of them), each tensor stacked
        along a new first dimension in rank order: (world_size, ...). In a world of one, `data`
        itself (numbers as tensors), as Lightning hands it back."""
        data = _model.apply_to(data, (bool, int, float), torch.tensor)  # numbers as tensors, as Lightning's
        if not self._here().distributed:
            return data
        group = group if group is not None else dist.group.WORLD
        return _model.apply_to_tensors(data, functools.partial(_gathered, group=group, sync_grads=sync_grads))

    def broadcast(self, obj, src=0):
        """Rank `src`'s `obj` (any picklable object) on every rank."""
        if not self._here().distributed:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=src)
        return box[0]

    def save(self, content, filepath):
        """torch.save on rank 0 only: into a new file of this user's alone beside `filepath`
        (never through a link someone put there), then moved onto it."""
        if self.global_rank == 0:
            _handoff.write_beside(os.fspath(filepath), lambda f: torch.save(content, f))

    def load(self, filepath):
        """torch.load, with weights_only where the installed torch loads tensors, numbers and
        containers that way (torch 2.x): a file another user put there runs no code."""
        return torch.load(filepath, weights_only=_checkpoint.weights_only())

    @staticmethod
    def seed_everything(seed=None, workers=None):
        """Python's, NumPy's (where installed) and torch's generators seeded with `seed`; without
        one, PL_GLOBAL_SEED's or a fresh one (said in one line), as Lightning's. Returns the seed.
        `workers` is accepted: torch seeds each DataLoader worker from it already."""
        if seed is None:
            text = os.environ.get("PL_GLOBAL_SEED")
            if text is None:
                seed = random.randint(0, 2**32 - 1)
                _options.tell([f"seed_everything(): no seed given, using {seed}"])
            else:
                seed = int(text)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TypeError(f"nano_torch: seed_everything() takes an int seed, got {seed!r}")
        if not 0 <= seed < 2**32:
            raise ValueError(f"nano_torch: seed_everything() takes a seed in [0, 2**32), got {seed}")
        os.environ["PL_GLOBAL_SEED"] = str(seed)
        random.seed(seed)
        torch.manual_seed(seed)
        try:
            import numpy
            numpy.random.seed(seed)
        except ImportError:
            pass
        return seed


def _gathered(tensor, group, sync_grads):
    tensor = tensor.contiguous()
    if sync_grads:  # the gradient flows back to every rank's input
        import torch.distributed.nn.functional as distributed_functional
        return torch.stack(distributed_functional.all_gather(tensor, group=group))
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, tensor, group=group)
    return torch.stack(parts)


def _launching(train):
    @functools.wraps(train)
    def train_in_ranks(self, *args, **kwargs):
        if self._nano_world is not None:  # inside a rank already
            return train(self, *args, **kwargs)
        options = self._nano_options
        world = _setup.world_for_call(options)
        if world is not None:
            self._nano_world = world
            try:
                return train(self, *args, **kwargs)
            finally:
                self._nano_world = None
        payload = {"kind": "lite", "target": self, "train": train, "args": args, "kwargs": kwargs}
        return _launch.launch(payload, f"{type(self).__name__}.train", options)

    train_in_ranks._nano_launching = True
    return train_in_ranks
