"""The model setup() hands back: BigDL-Nano's _TorchNanoModule (Lightning's _LiteModule) on nano.
Its forward casts the floating tensors it is given to the precision's dtype (float32 at 32,
float64 at 64, bfloat16 at "bf16") and 4-D ones to channels-last with channels_last, runs the
model (through DDP at several ranks) under CPU autocast for "bf16", and hands back floating
outputs as float32 at 32 and "bf16" (Lightning's default dtype), so a loss against float32
targets works; at 64 they stay float64, as the loaders' targets are (precision 64 formats them).
state_dict() and load_state_dict() are the user's module's, without DDP's "module." prefix; any
other attribute is the user's module's."""
import contextlib

import torch

from . import _timeline

DTYPES = {"32": torch.float32, "64": torch.float64, "bf16": torch.bfloat16}


def apply_to(obj, kinds, function):
    """`function` applied to every value of `kinds` in `obj` (such a value, or lists, tuples, named
    tuples and dicts of them, nested); anything else as it is."""
    if isinstance(obj, kinds):
        return function(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a named tuple
        return type(obj)(*(apply_to(item, kinds, function) for item in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(apply_to(item, kinds, function) for item in obj)
    if isinstance(obj, dict):
        return type(obj)((key, apply_to(value, kinds, function)) for key, value in obj.items())
    return obj


def apply_to_tensors(obj, function):
    """`function` applied to every tensor in `obj` (see apply_to)."""
    return apply_to(obj, torch.Tensor, function)


def _formatted(dtype, channels_last):
    """One tensor as the options want it: floating ones in `dtype` (None: as they are), 4-D ones
    channels-last with channels_last."""
    def format_tensor(t):
        if dtype is not None and t.is_floating_point() and t.dtype != dtype:
            t = t.to(dtype)
        return t.contiguous(memory_format=torch.channels_last) if channels_last and t.dim() == 4 else t
    return format_tensor


def autocast(options):
    """The context the forward runs in: CPU autocast to bfloat16 for precision "bf16"."""
    if options.precision == "bf16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


class NanoModule(torch.nn.Module):
    """The model setup() hands back (see the module's docstring)."""

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
        options = self._nano_options
        args, kwargs = apply_to_tensors((args, kwargs), _formatted(DTYPES[options.precision], options.channels_last))
        with autocast(options):
            out = self._forward_module(*args, **kwargs)
        if options.precision != "64":
            out = apply_to_tensors(out, _formatted(torch.float32, False))
        return out

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
    """The user's module in the options' precision (64: float64 parameters) and memory format."""
    if options.precision == "64":
        module.double()
    if options.channels_last:
        module.to(memory_format=torch.channels_last)
    return module


def format_batch(batch, options):
    """A loader's batch as the model and the loss expect it: at precision 64 its floating tensors
    (targets included) in float64; with channels_last its 4-D tensors channels-last."""
    if options.precision != "64" and not options.channels_last:
        return batch
    dtype = torch.float64 if options.precision == "64" else None
    return apply_to_tensors(batch, _formatted(dtype, options.channels_last))
