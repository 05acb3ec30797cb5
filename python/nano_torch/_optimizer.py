"""The optimizer setup() hands back: BigDL-Nano's _TorchNanoOptimizer on nano. It carries BigDL's
attributes (optimizer, auto_lr, cur_step, max_step, cur_lr_ratio, max_lr_ratio) and is an
instance of the user's optimizer class, so schedulers and isinstance checks take it where they
took the user's optimizer.

auto_lr as BigDL did it: the warm-up factor applies only while step() runs. Before the step each
group's rate is multiplied by cur_lr_ratio, after it the user's rate is put back, so param_groups
and state_dict() always hold the user's rates, a scheduler that sets the rate outright (LambdaLR,
OneCycleLR) composes with the warm-up, and saving and setting up again never scales twice. Step k
(counting from 0) runs at ratio 1 + (R - 1) * min(k, max_step) / max_step, R the world size the
rates were chosen for (nano::auto_lr_ratio's schedule); setting up an optimizer again starts a
fresh warm-up, as BigDL's did.

The wrapper holds no optimizer state of its own: param_groups, state and defaults are the user's
optimizer's (read and written through), every method that touches them runs on the user's
optimizer, and an attribute set on the wrapper is set on the user's optimizer (but for what
schedulers patch on the object they are given), so the two never drift apart. Pickled or
deep-copied, a set-up optimizer is the user's optimizer."""
from . import _timeline

_classes = {}  # the user's optimizer class -> its nano subclass


def warmup_ratio(step, ratio, max_step):
    """Pure: the factor of the rates at warm-up step `step` (0 for the first step()), towards
    `ratio` over `max_step` steps, written as BigDL-Nano computed it (max_step 0: no warm-up at all,
    the factor stays 1, as BigDL-Nano's did)."""
    if max_step <= 0:
        return 1.0
    return (ratio - 1) * min(step, max_step) / max_step + 1


def _shared(name):
    return property(lambda self: getattr(self._optimizer, name),
                    lambda self, value: setattr(self._optimizer, name, value),
                    doc=f"The user's optimizer's {name}.")


class NanoOptimizer:
    """The base of every set-up optimizer's class (its other base is the user's optimizer class)."""

    param_groups = _shared("param_groups")
    state = _shared("state")
    defaults = _shared("defaults")

    @property
    def optimizer(self):
        """The user's optimizer (Lightning's and BigDL's name for it)."""
        return self._optimizer

    def step(self, closure=None):
        """The user's optimizer's step, its rates times cur_lr_ratio while it runs (auto_lr), then
        one warm-up step further."""
        if self._nano_distributed:
            _timeline.optimizer_stepping()
        if not self.auto_lr or self.max_lr_ratio is None or self.max_lr_ratio == 1:
            return self._call_step(closure)
        rates = [group["lr"] for group in self.param_groups]
        for group in self.param_groups:
            if group["lr"] is not None:  # an optimizer that finds its own rate (lr=None) is left to it
                group["lr"] = group["lr"] * self.cur_lr_ratio
        try:
            out = self._call_step(closure)
        finally:
            for group, rate in zip(self.param_groups, rates):
                group["lr"] = rate
        if self.cur_step < self.max_step:
            self.cur_step += 1
            self.cur_lr_ratio = warmup_ratio(self.cur_step, self.max_lr_ratio, self.max_step)
        return out

    def _call_step(self, closure):
        # An optimizer of the user's own may define step(self) without a closure.
        return self._optimizer.step() if closure is None else self._optimizer.step(closure)

    def zero_grad(self, *args, **kwargs):
        return self._optimizer.zero_grad(*args, **kwargs)

    def state_dict(self):
        """The user's optimizer's: its own rates, never the warm-up's."""
        return self._optimizer.state_dict()

    def load_state_dict(self, state_dict):
        return self._optimizer.load_state_dict(state_dict)

    def add_param_group(self, param_group):
        return self._optimizer.add_param_group(param_group)

    def warmup_state(self):
        """Where the warm-up is, for a checkpoint."""
        return {"step": self.cur_step}

    def load_warmup_state(self, state):
        """Resumes the warm-up at a checkpoint's step. A checkpoint of nano_torch before this wrapper
        held the rates times its factor ("applied"): they are divided back to the user's."""
        applied = state.get("applied", 1.0)
        if applied != 1.0:
            for group in self.param_groups:
                if group["lr"] is not None:
                    group["lr"] = group["lr"] / applied
        self.cur_step = min(int(state["step"]), max(self.max_step, 0))
        self.cur_lr_ratio = warmup_ratio(self.cur_step, self.max_lr_ratio or 1, self.max_step)

    def __getattr__(self, name):
        # Only for what the wrapper does not have: the user's optimizer's own attributes and methods.
        if name == "_optimizer":
            raise AttributeError(name)
        return getattr(self._optimizer, name)

    def __setattr__(self, name, value):
        # The wrapper's own attributes, and what schedulers patch on the optimizer they are given
        # (its step and their counters), stay here; anything else is the user's optimizer's, so its
        # own methods see what was set.
        if name in _OWN or name in _PATCHED_BY_SCHEDULERS or name in self.__dict__:
            object.__setattr__(self, name, value)
        else:
            setattr(self._optimizer, name, value)

    def __reduce_ex__(self, protocol):
        # Pickled (or deep-copied) as the user's optimizer: the wrapper belongs to one setup().
        return unwrapped, (self._optimizer,)

    def __repr__(self):
        return repr(self._optimizer)


_OWN = ("_optimizer", "_nano_distributed", "auto_lr", "max_lr_ratio", "cur_step", "max_step", "cur_lr_ratio")
_PATCHED_BY_SCHEDULERS = ("step", "_step_count", "_opt_called")  # torch 1.13's and 2.x's LR schedulers


def wrap(optimizer, auto_lr, max_lr_ratio, max_step, distributed):
    """`optimizer` as setup() hands it back: an instance of a subclass of its class that shares its
    state; auto_lr's warm-up towards `max_lr_ratio` over `max_step` steps when `auto_lr`."""
    cls = type(optimizer)
    if cls not in _classes:
        _classes[cls] = type("Nano" + cls.__name__, (NanoOptimizer, cls), {"__module__": __name__})
    wrapped = object.__new__(_classes[cls])
    values = {"_optimizer": optimizer, "_nano_distributed": distributed, "auto_lr": auto_lr,
              "max_lr_ratio": max_lr_ratio, "cur_step": 0, "max_step": max_step, "cur_lr_ratio": 1.0}
    for name, value in values.items():
        object.__setattr__(wrapped, name, value)
    return wrapped


def unwrapped(optimizer):
    """The user's optimizer behind a set-up one (itself otherwise)."""
    return optimizer._optimizer if isinstance(optimizer, NanoOptimizer) else optimizer
