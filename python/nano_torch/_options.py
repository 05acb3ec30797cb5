"""The Python API's options (TorchNano, @nano): BigDL-Nano's keywords with their meaning and
nano's own, checked before anything starts. Launch settings go to the extension, which checks
them with the C++ API's own conversion (nano::TorchNanoOptions' fields, the same names), so an
error reads alike in both APIs; what only Python has (the torch.distributed backend, ipex) is
checked here."""
import dataclasses
import datetime
import importlib
import os
import sys

# Keywords that are nano::TorchNanoOptions' fields, passed on as they are: the launch settings that
# every front end honours, whose list the extension holds (_C.launch_setting_fields), and these.
_CHECKPOINT_KEYS = ("checkpoint_dir", "checkpoint_every_steps", "checkpoint_every_seconds", "checkpoint_keep")
_PYTHON_KEYS = ("output_ranks", "timeout", "auto_lr_warmup_steps")


@dataclasses.dataclass(frozen=True)
class Options:
    """Everything a launch and its ranks need; made by options_of()."""
    num_processes: int
    launch: dict                 # _C.launch's options: TorchNanoOptions' field names
    process_group_backend: str   # the ranks' torch.distributed backend
    precision: str               # "32", "64" or "bf16"
    channels_last: bool
    auto_lr: bool
    auto_lr_warmup_steps: int
    use_ipex: bool
    checkpoint: dict             # dir, every_steps, every_seconds, keep; {} = no checkpoints
    output_ranks: tuple          # whose output is shown; () = every rank's
    timeout: datetime.timedelta  # of the ranks' process group: bounds every collective


def _importable(module):
    try:
        importlib.import_module(module)
        return None
    except Exception as e:  # noqa: BLE001 - any failure to import is the reason we give
        return f"{type(e).__name__}: {e}"


def _pg_backend(value):
    if value is None or value == "nano":
        return "nano"
    if value == "gloo":
        return "gloo"
    if value == "ccl":
        why = _importable("oneccl_bindings_for_pytorch")
        if why:
            raise ValueError(f"nano_torch: process_group_backend='ccl' needs oneccl_bindings_for_pytorch, which does "
                             f"not import here ({why}); use None (nano's shared-memory backend) or 'gloo'")
        return "ccl"
    raise ValueError(f"nano_torch: unknown process_group_backend {value!r}: expected None (nano), 'gloo' or 'ccl'")


def _distributed_backend(value):
    # BigDL-Nano's "spawn" started fresh interpreters through multiprocessing; here every rank is a
    # fresh interpreter started by nano's launcher, pinned, which is what "subprocess" means too.
    if value == "spawn":
        return "subprocess"
    if value in ("ray", "k8s"):
        raise ValueError(f"nano_torch: distributed_backend={value!r} is not supported: for several machines use "
                         "distributed_backend='mpi' with hosts= or hostfile=, or nano-run under Slurm (srun)")
    if not isinstance(value, str):
        raise TypeError(f"nano: distributed_backend must be a str, got {value!r}")
    return value  # "subprocess", "mpi"; anything else is refused by the launch's own check


def _precision(value):
    text = {32: "32", 64: "64", 16: "16"}.get(value, value) if not isinstance(value, bool) else value
    if not isinstance(text, str):
        raise TypeError(f"nano: precision must be 32, 64 or 'bf16', got {value!r}")
    return text  # checked by the extension with the C++ API's words


def _flag(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"nano: {name} must be a bool, got {value!r}")
    return value


def options_of(num_processes=1, use_ipex=False, distributed_backend="subprocess", process_group_backend=None,
               precision=32, cpu_for_each_process=None, channels_last=False, auto_lr=True, **nano_options):
    """Checks every option (TypeError or ValueError naming it; nothing starts) and returns Options."""
    from . import _C
    known = tuple(_C.launch_setting_fields) + _CHECKPOINT_KEYS + _PYTHON_KEYS
    unknown = sorted(set(nano_options) - set(known))
    if unknown:
        raise TypeError(f"nano_torch: unknown option {unknown[0]!r} (nano's own: {', '.join(known)})")
    if isinstance(num_processes, bool) or not isinstance(num_processes, int):
        raise TypeError(f"nano: num_processes must be an int, got {num_processes!r}")
    if _flag("use_ipex", use_ipex):
        why = _importable("intel_extension_for_pytorch")
        if why:
            raise ValueError(f"nano_torch: use_ipex=True needs intel_extension_for_pytorch, which does not import "
                             f"here ({why}); use use_ipex=False")
    output_ranks = nano_options.pop("output_ranks", (0,))
    output_ranks = () if output_ranks is None else tuple(output_ranks)
    timeout = nano_options.pop("timeout", 1800)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float, datetime.timedelta)):
        raise TypeError(f"nano: timeout must be seconds or a timedelta, got {timeout!r}")
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=timeout)
    if timeout <= datetime.timedelta(0):
        raise ValueError(f"nano: timeout must be positive, got {timeout}")
    warmup = nano_options.pop("auto_lr_warmup_steps", 1000)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
        raise ValueError(f"nano: auto_lr_warmup_steps must be an int of at least 1, got {warmup!r}")
    launch = {k: v for k, v in nano_options.items() if v is not None}
    launch["num_processes"] = num_processes
    launch["distributed_backend"] = _distributed_backend(distributed_backend)
    launch["precision"] = _precision(precision)
    if cpu_for_each_process is not None:
        launch["cpu_for_each_process"] = [list(cpus) for cpus in cpu_for_each_process]
    checkpoint = {}
    if launch.get("checkpoint_dir"):
        steps, seconds = launch.get("checkpoint_every_steps", 0), launch.get("checkpoint_every_seconds", 0)
        checkpoint = {"dir": os.path.abspath(launch["checkpoint_dir"]), "every_steps": steps,
                      # nano::TorchNanoOptions' default: with neither frequency, every 300 s
                      "every_seconds": 300.0 if not steps and not seconds else seconds,
                      "keep": launch.get("checkpoint_keep", 2)}
    options = Options(num_processes=num_processes, launch=launch, checkpoint=checkpoint,
                      process_group_backend=_pg_backend(process_group_backend), precision=launch["precision"],
                      channels_last=_flag("channels_last", channels_last), auto_lr=_flag("auto_lr", auto_lr),
                      auto_lr_warmup_steps=warmup, use_ipex=use_ipex, output_ranks=output_ranks, timeout=timeout)
    if hasattr(_C, "check_launch"):  # absent from the build for a pip torch alone (no launcher)
        _C.check_launch(launch, list(output_ranks), [sys.executable])
    return options
