"""BigDL-Nano's Python API on nano: the TorchNano class and the @nano decorator.

    from nano_torch import TorchNano, nano

    class MyNano(TorchNano):
        def train(self):
            model, optimizer, loader = self.setup(model, optimizer, loader)
            ...
            self.backward(loss)

    MyNano(num_processes=2).train()      # rank 0's return value

    @nano(num_processes=2)
    def training_loop(model, optimizer, train_loader, num_epochs, loss_func): ...

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

from . import _launch, _options, _setup

RankFailedError = _launch.RankFailedError


def _outer_world(options):
    """The world of an outer launcher (nano-run, torchrun, mpirun) this process is a rank of."""
    if "RANK" not in os.environ and "OMPI_COMM_WORLD_SIZE" in os.environ:
        # A plain mpirun: torch's variables from Open MPI's; the address must come from the user.
        if "MASTER_ADDR" not in os.environ or "MASTER_PORT" not in os.environ:
            raise RuntimeError("nano_torch: under mpirun without nano-run, set MASTER_ADDR and MASTER_PORT for the "
                               "ranks to meet (or start the program with nano-run, which sets them)")
        os.environ.update(RANK=os.environ["OMPI_COMM_WORLD_RANK"], WORLD_SIZE=os.environ["OMPI_COMM_WORLD_SIZE"],
                          LOCAL_RANK=os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", "0"))
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return None
    world = _setup.World(rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),
                         local_rank=int(os.environ.get("LOCAL_RANK", "0")), options=options)
    if world.world_size > 1 and not dist.is_initialized():
        from . import BACKEND  # noqa: F401 - registers "nano" and "nano://"
        dist.init_process_group(options.process_group_backend, timeout=options.timeout)
    return world


def _single(options):
    return _setup.World(rank=0, world_size=1, local_rank=0, options=options)


class TorchNano:
    """BigDL-Nano's TorchNano: subclass it, write train() with self.setup() and
    self.backward(), and call train() on an instance."""

    def __init__(self, num_processes=1, use_ipex=False, distributed_backend="subprocess", process_group_backend=None,
                 precision=32, cpu_for_each_process=None, channels_last=False, auto_lr=True, **nano_options):
        self._nano_options = _options.options_of(num_processes, use_ipex, distributed_backend, process_group_backend,
                                                 precision, cpu_for_each_process, channels_last, auto_lr,
                                                 **nano_options)
        self._nano_world = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "train" in cls.__dict__ and not getattr(cls.__dict__["train"], "_nano_launching", False):
            cls.train = _launching(cls.__dict__["train"])

    def train(self, *args, **kwargs):
        """The training; override it. It runs in every rank."""
        raise NotImplementedError("nano_torch: a TorchNano subclass defines train()")

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_nano_world"] = None  # a world belongs to one process
        return state

    # ---- inside train() ----
    @property
    def _world(self):
        if self._nano_world is None:
            raise RuntimeError("nano_torch: TorchNano's setup(), backward() and the rank properties work "
                               "inside train()")
        return self._nano_world

    @property
    def global_rank(self):
        return self._world.rank

    @property
    def local_rank(self):
        return self._world.local_rank

    @property
    def world_size(self):
        return self._world.world_size

    @property
    def is_global_zero(self):
        return self._world.rank == 0

    def setup(self, model, optimizer, *dataloaders):
        """The model in DDP (and the precision, memory format), the optimizer(s) with auto_lr,
        each loader sharded: (model, optimizer) or (model, optimizer, loader) or
        (model, optimizer, [loaders]); optimizer may be a list, and comes back as one."""
        world = self._world
        optimizers = list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer]
        if world.options.use_ipex:
            import intel_extension_for_pytorch as ipex
            model, optimizers[0] = ipex.optimize(model, optimizer=optimizers[0])
        wrapped = _setup.setup_model(model, world)
        optimizers = [_setup.setup_optimizer(o, world) for o in optimizers]
        out_optimizer = optimizers if isinstance(optimizer, (list, tuple)) else optimizers[0]
        if not dataloaders:
            return wrapped, out_optimizer
        loaders = self.setup_dataloaders(*dataloaders)
        return wrapped, out_optimizer, loaders

    def setup_dataloaders(self, *dataloaders):
        """Each loader sharded across the ranks; one loader, or a list of them."""
        loaders = [_setup.setup_loader(d, self._world) for d in dataloaders]
        return loaders[0] if len(loaders) == 1 else loaders

    def backward(self, tensor, *args, **kwargs):
        tensor.backward(*args, **kwargs)

    def autocast(self):
        """The context of the options' precision (CPU autocast to bfloat16 for "bf16")."""
        return _setup.autocast(self._world.options)

    def print(self, *args, **kwargs):
        if self._world.rank == 0:
            print(*args, **kwargs)

    def barrier(self, name=None):
        if self._world.distributed:
            dist.barrier()

    def all_gather(self, tensor):
        """Every rank's `tensor`, stacked along a new first dimension (rank order)."""
        if not self._world.distributed:
            return tensor.unsqueeze(0)
        tensor = tensor.contiguous()
        parts = [torch.empty_like(tensor) for _ in range(self._world.world_size)]
        dist.all_gather(parts, tensor)
        return torch.stack(parts)

    def broadcast(self, obj, src=0):
        """Rank `src`'s `obj` (any picklable object) on every rank."""
        if not self._world.distributed:
            return obj
        box = [obj]
        dist.broadcast_object_list(box, src=src)
        return box[0]

    def save(self, content, filepath):
        """torch.save on rank 0 only."""
        if self._world.rank == 0:
            torch.save(content, filepath)

    def load(self, filepath):
        return torch.load(filepath)

    def seed_everything(self, seed):
        """The same seed for Python's, NumPy's (where installed) and torch's generators."""
        random.seed(seed)
        torch.manual_seed(seed)
        try:
            import numpy
            numpy.random.seed(seed)
        except ImportError:
            pass
        return seed


def _launching(train):
    @functools.wraps(train)
    def train_in_ranks(self, *args, **kwargs):
        if self._nano_world is not None:  # inside a rank already
            return train(self, *args, **kwargs)
        options = self._nano_options
        world = _outer_world(options)
        if world is None and options.num_processes == 1:
            world = _single(options)
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


def _roles(args, kwargs):
    """Pure: where the model, the optimizers and the DataLoaders are among a call's arguments:
    ([model path], [optimizer paths], [loader paths]), a path being ("arg", i) or ("kwarg", k)."""
    models, optimizers, loaders = [], [], []
    for path, value in [(("arg", i), v) for i, v in enumerate(args)] + [(("kwarg", k), v) for k, v in kwargs.items()]:
        if _setup.is_model(value):
            models.append(path)
        elif isinstance(value, torch.optim.Optimizer):
            optimizers.append(path)
        elif isinstance(value, torch.utils.data.DataLoader):
            loaders.append(path)
    return models, optimizers, loaders


def _check_roles(function, args, kwargs):
    models, optimizers, loaders = _roles(args, kwargs)
    if len(models) != 1:
        raise TypeError(f"nano_torch: @nano needs exactly one model (a torch.nn.Module with parameters, not a "
                        f"loss) among the arguments of {function.__qualname__}, found {len(models)}")
    return models, optimizers, loaders


def call_decorated(function, args, kwargs, world):
    """Calls `function` with its model, optimizers and loaders set up for `world`."""
    models, optimizers, loaders = _check_roles(function, args, kwargs)
    args, kwargs = list(args), dict(kwargs)

    def replace(path, make):
        if path[0] == "arg":
            args[path[1]] = make(args[path[1]])
        else:
            kwargs[path[1]] = make(kwargs[path[1]])

    replace(models[0], lambda m: _setup.setup_model(m, world))
    for path in optimizers:
        replace(path, lambda o: _setup.setup_optimizer(o, world))
    for path in loaders:
        replace(path, lambda d: _setup.setup_loader(d, world))
    return function(*args, **kwargs)


def nano(num_processes=1, use_ipex=False, distributed_backend="subprocess", process_group_backend=None, precision=32,
         cpu_for_each_process=None, channels_last=False, auto_lr=True, **nano_options):
    """BigDL-Nano's @nano: runs the decorated training function in num_processes ranks, its one
    model, its optimizers and its DataLoaders (found among the arguments by type, positional or
    keyword) set up as TorchNano.setup() does; returns rank 0's value."""
    options = _options.options_of(num_processes, use_ipex, distributed_backend, process_group_backend, precision,
                                  cpu_for_each_process, channels_last, auto_lr, **nano_options)

    def decorator(function):
        @functools.wraps(function)
        def in_ranks(*args, **kwargs):
            _check_roles(function, args, kwargs)
            world = _outer_world(options)
            if world is None and options.num_processes == 1:
                world = _single(options)
            if world is not None:
                return call_decorated(function, args, kwargs, world)
            payload = {"kind": "function", "function": function, "args": args, "kwargs": kwargs}
            return _launch.launch(payload, function.__qualname__, options)

        return in_ranks

    return decorator
