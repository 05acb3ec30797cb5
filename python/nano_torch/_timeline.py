"""The steps and phases of `timeline=` (nano-run --timeline) that only Python sees; the recorder
is nano's own (runtime/timeline.h), and nothing here runs when the timeline is off.

- The Python API's ranks (setup()): a set-up loader's next batch is the data phase; the model's
  first training forward of a step starts its compute; a DDP communication hook notes when each
  gradient bucket goes to the exchange and when its all-reduce is done. The first set-up
  optimizer to step after a synchronising backward ends the step: compute ran until the last
  bucket went, the exchange wait until the last all-reduce was done, as nano's own DDP counts
  them. In a world of one (no DDP) the loader's batches end the steps.
- A stock program on the nano backend: on torch 2, the optimizers' global step hooks end the
  steps (the first optimizer to step clocks them), the step's compute ending where the
  optimizer starts; torch 1.13 has no such hooks, so only the collectives are recorded there.
"""
import weakref

import torch

from . import _C

ON = _C._timeline_on()

# The Python API is in charge of this process's steps: the stock programs' optimizer hooks stand
# aside (they would end each step twice).
_python_api = False


def data_begin():
    if ON:
        _C._timeline_data_begin()


def data_end():
    if ON:
        _C._timeline_data_end()


def forward_begin(module):
    if ON and module.training and torch.is_grad_enabled():
        _C._timeline_forward_begin()


class _Buckets:
    """One DDP's buckets in the backward in progress: when the last went, when the last was done
    (timeline clock, ns; 0: none since the last step ended)."""

    def __init__(self):
        self.last_ready = 0
        self.last_done = 0


_backwards = []  # every set-up DDP's _Buckets


def _timed_allreduce(buckets, bucket):
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    buckets.last_ready = _C._timeline_now()

    def done(future):
        buckets.last_done = _C._timeline_now()
        return future.value()

    return allreduce_hook(None, bucket).then(done)


def watch_model(forward):
    """The Python API set up a model whose calls go to `forward`: the Python API ends this
    process's steps, and a DDP `forward` reports its buckets (before its first forward)."""
    global _python_api
    _python_api = True
    if ON and isinstance(forward, torch.nn.parallel.DistributedDataParallel):
        buckets = _Buckets()
        _backwards.append(buckets)
        forward.register_comm_hook(buckets, _timed_allreduce)


def optimizer_stepping():
    """A set-up optimizer starts its step: the step of the last synchronising backward ends."""
    global _python_api
    _python_api = True
    if not ON:
        return
    for buckets in _backwards:
        if buckets.last_ready:
            _C._timeline_backward_ended(buckets.last_ready, buckets.last_done)
            buckets.last_ready = buckets.last_done = 0
            return


_clock = None  # a weak reference to the optimizer whose steps are the program's steps


def _clocks(optimizer):
    global _clock
    if _python_api:
        return False
    if _clock is None or _clock() is None:
        _clock = weakref.ref(optimizer)
    return _clock() is optimizer


def _pre_step(optimizer, args, kwargs):
    if _clocks(optimizer):
        _C._timeline_optimizer_begin()


def _post_step(optimizer, args, kwargs):
    if _clocks(optimizer):
        _C._timeline_step_end()


def watch_stock_optimizers():
    """On torch 2, a stock program's optimizer steps end its steps (only when the timeline is on)."""
    import torch.optim.optimizer as optimizer_module

    if ON and hasattr(optimizer_module, "register_optimizer_step_post_hook"):
        optimizer_module.register_optimizer_step_pre_hook(_pre_step)
        optimizer_module.register_optimizer_step_post_hook(_post_step)
