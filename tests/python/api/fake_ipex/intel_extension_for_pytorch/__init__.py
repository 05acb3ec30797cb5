"""A stand-in for intel_extension_for_pytorch (IPEX), which Debian does not package and Intel retired:
it records how nano_torch calls ipex.optimize (what model, which optimizer, the dtype, in place or
not, in which mode) as one JSON line per call in $FAKE_IPEX_LOG, and changes nothing. It checks
nano_torch's side of the contract only; what IPEX itself does is not tested here."""
import json
import os

import torch


def optimize(model, dtype=None, optimizer=None, level="O1", inplace=False, **kwargs):
    with open(os.environ["FAKE_IPEX_LOG"], "a") as f:
        f.write(json.dumps({"rank": os.environ.get("RANK", "-"), "model": type(model).__name__,
                            "optimizer": type(optimizer).__name__ if optimizer is not None else None,
                            "optimizer_lr": optimizer.param_groups[0]["lr"] if optimizer is not None else None,
                            "dtype": str(dtype), "inplace": inplace, "training": model.training}) + "\n")
    if optimizer is None:
        return model
    return model, optimizer
