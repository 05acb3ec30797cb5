"""The steps and phases of `timeline=` (nano-run --timeline) that only Python sees; the recorder
is nano's own (runtime/timeline/recorder.h), and nothing here runs when the timeline is off.

- The Python API's ranks (setup()): a set-up loader's next batch is the data phase; the model's
  first training forward of a step starts its compute. The nano backend notes each collective
  as it is issued and as it ends, so when the first set-up optimizer steps after a synchronising
  backward, compute ran until the last gradient bucket was issued and the exchange wait until
  the last all-reduce ended, as nano's own DDP counts them; the step ends there. On another
  backend (gloo) a DDP communication hook notes the buckets' issue instead, and the exchange
  wait runs until the optimizer starts. In a world of one (no DDP) the loader's batches end the
  steps.
- A stock program, on torch 2: the optimizers' global step hooks end its steps (the first
  optimizer to step clocks them), split the same way where it runs on the nano backend; the
  optimizer's step is "optimizer and other". torch 1.13 has no such hooks: only the collectives
  are recorded there.
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


def _issued_allreduce(process_group, bucket):
    """DDP's own all-reduce of a gradient bucket (the average, as its reducer takes it: times 1/N),
    its issue noted (backends other than nano)."""
    _C._timeline_collective_issued()
    gradients = bucket.buffer()
    gradients.mul_(1.0 / torch.distributed.get_world_size(process_group))
    work = torch.distributed.all_reduce(gradients, group=process_group, async_op=True)
    return work.get_future().then(lambda done: done.value()[0])


def watch_model(forward):
    """The Python API set up a model whose calls go to `forward`: the Python API ends this
    process's steps; a DDP `forward` on another backend than nano has its buckets' issue noted
    (before its first forward)."""
    global _python_api
    _python_api = True
    if (ON and isinstance(forward, torch.nn.parallel.DistributedDataParallel)
            and torch.distributed.get_backend(forward.process_group) != "nano"):
        forward.register_comm_hook(forward.process_group, _issued_allreduce)


def optimizer_stepping():
    """A set-up optimizer starts its step: the step of the last synchronising backward ends
    (setup() set up the model first: watch_model put the Python API in charge)."""
    if ON:
        _C._timeline_exchange_waited(True)


_clock = None  # a weak reference to the optimizer whose steps are the program's steps


def _clocks(optimizer):
    global _clock
    if _python_api:
        return False
    if _clock is None or _clock() is None:
        _clock = weakref.ref(optimizer)
    return _clock() is optimizer


def _pre_step(optimizer, args, kwargs):
    if _clocks(optimizer) and not _C._timeline_exchange_waited(False):
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
