"""use_ipex=True. Intel retired intel_extension_for_pytorch (IPEX) in 2025, so most machines do not
have it: there use_ipex=True runs on stock PyTorch, with one line that says so (IPEX's own work,
operator fusion and weight prepacking for Intel CPUs, is what is missing; nano's pinning, thread
recipe and allocator apply either way, and "bf16" runs under torch's CPU autocast). Where IPEX is
installed it is applied as BigDL-Nano applied it: after the DDP wrapping, in place, with
dtype=torch.bfloat16 under "bf16", the model with each optimizer in turn."""
import importlib

import torch


def missing_line(precision):
    """The one line use_ipex=True prints where IPEX does not import."""
    instead = "stock PyTorch's CPU kernels (oneDNN)" + (" and torch.autocast for bf16" if precision == "bf16" else "")
    return ("use_ipex=True: intel_extension_for_pytorch is not installed (Intel retired it in 2025), so training runs "
            f"without it: {instead}, with nano's pinning, threads and allocator")


def dtype(options):
    """BigDL-Nano's TorchNano.dtype: torch.bfloat16 for use_ipex with precision "bf16", else None."""
    return torch.bfloat16 if options.use_ipex and options.precision == "bf16" else None


def optimize(model, optimizers, options):
    """(model, optimizers) after ipex.optimize where IPEX imports in this rank; as they are where
    it does not (the caller said so in its line)."""
    try:
        ipex = importlib.import_module("intel_extension_for_pytorch")
    except Exception:  # noqa: BLE001 - the caller printed why
        return model, optimizers
    training = model.training
    model.train(bool(optimizers))  # IPEX optimizes a model without an optimizer for inference, as BigDL-Nano asked
    if not optimizers:
        model = ipex.optimize(model, dtype=dtype(options), inplace=True)
    out = []
    for optimizer in optimizers:
        model, optimizer = ipex.optimize(model, dtype=dtype(options), optimizer=optimizer, inplace=True)
        out.append(optimizer)
    model.train(training)
    return model, out
