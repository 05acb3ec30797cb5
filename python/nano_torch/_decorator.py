"""BigDL-Nano's @nano decorator on nano: the decorated training function runs in num_processes
ranks, its one model, its optimizers and its DataLoaders (found among the arguments by type,
positional or keyword) set up as TorchNano.setup() does; the call returns rank 0's value.

Applying the decorator only checks the options. In a launcher's rank (a module with
@nano(num_processes=16) imported by a rank of 4 cores) it checks nothing against the machine and
starts nothing: the launch is checked and made at call time, in the caller."""
import functools

import torch

from . import _launch, _loader, _options, _setup


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

    def get(path):
        return args[path[1]] if path[0] == "arg" else kwargs[path[1]]

    def put(path, value):
        if path[0] == "arg":
            args[path[1]] = value
        else:
            kwargs[path[1]] = value

    model, set_up = _setup.setup(get(models[0]), [get(path) for path in optimizers], world)
    put(models[0], model)
    for path, optimizer in zip(optimizers, set_up):
        put(path, optimizer)
    for path in loaders:
        put(path, _loader.setup_loader(get(path), world))
    return function(*args, **kwargs)


def nano(num_processes=None, use_ipex=False, distributed_backend="subprocess", precision=32,
         cpu_for_each_process=None, channels_last=False, auto_lr=True, *args, **kwargs):
    """BigDL-Nano's @nano (see the module's docstring). Its keywords are TorchNano's
    (process_group_backend, LightningLite's, nano's own), its positional ones BigDL-Nano's."""
    if args:
        raise TypeError(f"nano_torch: @nano takes 7 positional arguments (BigDL-Nano's), got {7 + len(args)}: "
                        "pass the others by keyword")
    pg_backend = kwargs.pop("process_group_backend", None)
    options = _options.options_of(num_processes, use_ipex, distributed_backend, pg_backend, precision,
                                  cpu_for_each_process, channels_last, auto_lr, **kwargs)
    _options.tell(options.notes)

    def decorator(function):
        @functools.wraps(function)
        def in_ranks(*inner_args, **inner_kwargs):
            _check_roles(function, inner_args, inner_kwargs)
            world = _setup.world_for_call(options)
            if world is not None:
                return call_decorated(function, inner_args, inner_kwargs, world)
            payload = {"kind": "function", "function": function, "args": inner_args, "kwargs": inner_kwargs}
            return _launch.launch(payload, function.__qualname__, options)

        return in_ranks

    return decorator
