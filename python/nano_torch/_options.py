"""The Python API's options (TorchNano, @nano): BigDL-Nano's keywords with their meaning,
LightningLite 1.6's (which BigDL-Nano passed on to Lightning), and nano's own, checked before
anything starts. Launch settings go to the extension, which checks them with the C++ API's own
conversion (nano::TorchNanoOptions' fields, the same names), so an error reads alike in both APIs;
what only Python has (the torch.distributed backend, IPEX, Lightning's keywords) is checked here.

Where BigDL-Nano or Lightning did something a CPU job here does differently, the caller gets one
line saying what nano does instead (notes); where they ask for what a CPU job cannot do (GPUs,
Ray, Lightning's plugins), one error naming what to use instead."""
import dataclasses
import datetime
import importlib
import os
import sys

from . import _ipex

# Keywords that are nano::TorchNanoOptions' fields, passed on as they are: the launch settings that
# every front end honours, whose list the extension holds (_C.launch_setting_fields), and these.
_CHECKPOINT_KEYS = ("checkpoint_dir", "checkpoint_every_steps", "checkpoint_every_seconds", "checkpoint_keep",
                    "checkpoint_shared_folder")
_PYTHON_KEYS = ("output_ranks", "timeout", "auto_lr_warmup_steps", "find_unused_parameters")
# LightningLite.__init__'s keywords (precision is BigDL-Nano's own), in its positional order.
LITE_KEYS = ("accelerator", "strategy", "devices", "num_nodes", "plugins", "gpus", "tpu_cores")

# Lightning's strategy names that BigDL-Nano passed to Lightning when given as distributed_backend:
# data-parallel ranks on this host, which is what nano's own launch is.
_LIGHTNING_DDP = ("ddp", "ddp_spawn", "ddp_fork", "ddp_notebook", "ddp_find_unused_parameters_false",
                  "ddp_spawn_find_unused_parameters_false", "ddp_fork_find_unused_parameters_false")


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
    find_unused_parameters: bool = True  # DDP's, as BigDL-Nano set it
    notes: tuple = ()            # lines for the caller: what nano does instead of what was asked


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


def distributed_backend_of(value, notes):
    """Pure: nano's launch for BigDL-Nano's distributed_backend (and the Lightning strategy names
    BigDL-Nano handed on to Lightning); (backend, find_unused_parameters or None)."""
    if not isinstance(value, str):
        raise TypeError(f"nano: distributed_backend must be a str, got {value!r}")
    # BigDL-Nano's "spawn" started fresh interpreters through multiprocessing; here every rank is a
    # fresh interpreter started by nano's launcher, pinned, which is what "subprocess" means too.
    if value in ("subprocess", "spawn"):
        return "subprocess", None
    if value == "mpi":
        return "mpi", None
    if value in ("ray", "k8s"):
        raise ValueError(f"nano_torch: distributed_backend={value!r} is not supported: for several machines use "
                         "distributed_backend='mpi' with hosts= or hostfile=, or nano-run under Slurm (srun)")
    if value in _LIGHTNING_DDP:
        notes.append(f"distributed_backend={value!r} is a Lightning strategy, which BigDL-Nano handed to Lightning: "
                     "nano starts its own DDP ranks (distributed_backend='subprocess')")
        return "subprocess", (False if value.endswith("_find_unused_parameters_false") else None)
    raise ValueError(f"nano_torch: unknown distributed_backend {value!r}: expected 'subprocess', 'spawn' or 'mpi' "
                     "(Lightning's 'ddp' strategies run as 'subprocess'; 'dp', 'deepspeed' and the sharded ones do "
                     "not exist on nano)")


def precision_of(value, notes):
    """Pure: "32", "64" or "bf16" for BigDL-Nano's precision; 16 is bf16 on a CPU, as Lightning
    made it there."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"nano: precision must be 32, 64 or 'bf16', got {value!r}")
    text = {"32-true": "32", "64-true": "64", "bf16-mixed": "bf16"}.get(str(value), str(value))  # Lightning 2's names
    if text in ("16", "16-mixed"):
        notes.append(f"precision={value!r} is float16 autocast, which CPUs do not run: bf16 instead "
                     "(precision='bf16'), as Lightning did on a CPU")
        return "bf16"
    return text  # checked by the extension with the C++ API's words


def lite_keywords(num_processes, given, notes):
    """Pure: checks LightningLite's keywords for a CPU job of `num_processes` ranks (ValueError or
    TypeError naming the keyword and what to use instead); what is ignored goes to `notes`."""
    accelerator = given.get("accelerator")
    if accelerator is not None and not isinstance(accelerator, str):
        raise TypeError(f"nano_torch: accelerator must be 'cpu' or 'auto', got {accelerator!r}")
    if accelerator not in (None, "cpu", "auto"):
        raise ValueError(f"nano_torch: accelerator={accelerator!r}: nano trains on CPUs; use accelerator='cpu' (or "
                         "leave it out) and num_processes for the ranks")
    for key in ("gpus", "tpu_cores"):
        value = given.get(key)
        if value not in (None, 0, [], "", "0"):
            raise ValueError(f"nano_torch: {key}={value!r}: nano trains on CPUs; leave {key} out and set "
                             "num_processes for the ranks")
    devices = given.get("devices")
    if isinstance(devices, str) and devices.isdigit():
        devices = int(devices)
    if devices not in (None, "auto") and (isinstance(devices, bool) or devices != num_processes):
        raise ValueError(f"nano_torch: devices={devices!r} differs from num_processes={num_processes}: on a CPU "
                         f"nano starts num_processes ranks; set num_processes (and leave devices out)")
    num_nodes = given.get("num_nodes")
    if num_nodes not in (None, 1):
        raise ValueError(f"nano_torch: num_nodes={num_nodes!r}: name the machines with hosts= or hostfile= and "
                         "distributed_backend='mpi' (or run under Slurm); num_nodes stays 1")
    plugins = given.get("plugins")
    if plugins not in (None, [], ()):
        raise ValueError(f"nano_torch: plugins={plugins!r}: Lightning's plugins are not part of nano_torch; "
                         "precision=, channels_last= and nano's own options cover what they did on a CPU")
    strategy = given.get("strategy")
    if strategy is not None:
        notes.append(f"strategy={strategy!r} is ignored, as BigDL-Nano ignored it: nano starts the ranks "
                     "(distributed_backend)")


def under_launcher():
    """Whether this process is a rank of some launcher (nano-run, torchrun, mpirun, a Python
    launch): there a TorchNano or @nano joins that world and launches nothing."""
    return ("RANK" in os.environ and "WORLD_SIZE" in os.environ) or "OMPI_COMM_WORLD_SIZE" in os.environ


_told = set()


def tell(notes):
    """Each note once per process, as one line on standard error; not from the ranks of a Python
    launch (the caller said it) nor from ranks other than 0 of an outer launcher."""
    from ._handoff import KEY_VARIABLE
    if KEY_VARIABLE in os.environ or os.environ.get("RANK", "0") != "0":
        return
    for note in notes:
        if note not in _told:
            _told.add(note)
            print(f"nano_torch: {note}", file=sys.stderr, flush=True)


def options_of(num_processes=None, use_ipex=False, distributed_backend="subprocess", process_group_backend=None,
               precision=32, cpu_for_each_process=None, channels_last=False, auto_lr=True, lite_args=(), **keywords):
    """Checks every option (TypeError or ValueError naming it; nothing starts) and returns Options.
    `lite_args` are LightningLite's positional arguments after BigDL-Nano's. The launch itself is
    checked against this machine (cores, hosts) only outside a launcher's rank: a rank that
    imports a module with @nano(num_processes=16) or a TorchNano made at its top runs nothing."""
    from . import _C
    notes = []
    if len(lite_args) > 1:
        raise TypeError(f"nano_torch: TorchNano takes one positional argument after auto_lr (LightningLite's "
                        f"accelerator), got {len(lite_args)}: pass the others by keyword")
    if lite_args:
        if "accelerator" in keywords:
            raise TypeError("nano_torch: TorchNano got accelerator twice (positional and keyword)")
        keywords["accelerator"] = lite_args[0]
    lite = {k: keywords.pop(k) for k in LITE_KEYS if k in keywords}
    known = tuple(_C.launch_setting_fields) + _CHECKPOINT_KEYS + _PYTHON_KEYS + LITE_KEYS
    unknown = sorted(set(keywords) - set(known))
    if unknown:
        raise TypeError(f"nano_torch: unknown option {unknown[0]!r} (the options besides BigDL-Nano's: "
                        f"{', '.join(known)})")
    if num_processes is None:  # BigDL-Nano's default, which meant 1
        num_processes = 1
    if isinstance(num_processes, bool) or not isinstance(num_processes, int):
        raise TypeError(f"nano: num_processes must be an int, got {num_processes!r}")
    lite_keywords(num_processes, lite, notes)
    backend, find_unused = distributed_backend_of(distributed_backend, notes)
    precision = precision_of(precision, notes)
    if _flag("use_ipex", use_ipex) and _importable("intel_extension_for_pytorch"):
        notes.append(_ipex.missing_line(precision))
    output_ranks = keywords.pop("output_ranks", (0,))
    output_ranks = () if output_ranks is None else _ints("output_ranks", output_ranks)
    timeout = keywords.pop("timeout", 1800)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float, datetime.timedelta)):
        raise TypeError(f"nano: timeout must be seconds or a timedelta, got {timeout!r}")
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=timeout)
    if timeout <= datetime.timedelta(0):
        raise ValueError(f"nano: timeout must be positive, got {timeout}")
    warmup = keywords.pop("auto_lr_warmup_steps", 1000)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 1:
        raise ValueError(f"nano: auto_lr_warmup_steps must be an int of at least 1, got {warmup!r}")
    unused = keywords.pop("find_unused_parameters", True if find_unused is None else find_unused)
    launch = {k: v for k, v in keywords.items() if v is not None}
    launch["num_processes"] = num_processes
    launch["distributed_backend"] = backend
    launch["precision"] = precision
    if cpu_for_each_process is not None:
        launch["cpu_for_each_process"] = [list(cpus) for cpus in _int_lists("cpu_for_each_process",
                                                                            cpu_for_each_process)]
    checkpoint = {}
    if launch.get("checkpoint_dir"):
        steps, seconds = launch.get("checkpoint_every_steps", 0), launch.get("checkpoint_every_seconds", 0)
        checkpoint = {"dir": os.path.abspath(launch["checkpoint_dir"]), "every_steps": steps,
                      # nano::TorchNanoOptions' default: with neither frequency, every 300 s
                      "every_seconds": 300.0 if not steps and not seconds else seconds,
                      "keep": launch.get("checkpoint_keep", 2),
                      "shared": launch.get("checkpoint_shared_folder", False)}
    options = Options(num_processes=num_processes, launch=launch, checkpoint=checkpoint,
                      process_group_backend=_pg_backend(process_group_backend), precision=precision,
                      channels_last=_flag("channels_last", channels_last), auto_lr=_flag("auto_lr", auto_lr),
                      auto_lr_warmup_steps=warmup, use_ipex=use_ipex, output_ranks=output_ranks, timeout=timeout,
                      find_unused_parameters=_flag("find_unused_parameters", unused), notes=tuple(notes))
    if hasattr(_C, "check_launch") and not under_launcher():  # absent from the build for a pip torch alone
        _C.check_launch(launch, list(output_ranks), [sys.executable])
    return options


def _ints(name, value):
    """`value` (a list of ints) as a tuple, or a TypeError naming the option."""
    try:
        return tuple(value)
    except TypeError:
        raise TypeError(f"nano: {name} must be a list of ints, got {value!r}") from None


def _int_lists(name, value):
    """`value` (a list of lists of ints) as a tuple of tuples, or a TypeError naming the option."""
    try:
        return tuple(tuple(item) for item in value)
    except TypeError:
        raise TypeError(f"nano: {name} must be a list of lists of ints, got {value!r}") from None


def _flag(name, value):
    if not isinstance(value, bool):
        raise TypeError(f"nano: {name} must be a bool, got {value!r}")
    return value
