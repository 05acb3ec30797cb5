"""What setup() does inside a rank (and in the caller's own process at num_processes=1): the model
in the options' precision and memory format, in DDP on the job's process group (with
find_unused_parameters, as BigDL-Nano set it), IPEX applied where it is installed and asked for,
then the model and the optimizers wrapped as BigDL-Nano's were (_model.NanoModule,
_optimizer.NanoOptimizer: precision casts, auto_lr); each DataLoader sharded across the ranks
(_loader.ShardedLoader)."""
import dataclasses
import os

import torch
import torch.distributed as dist

from . import _ipex, _loader, _model, _optimizer, _timeline


@dataclasses.dataclass
class World:
    """This process's place among the ranks of one training."""
    rank: int
    world_size: int
    local_rank: int
    options: object  # _options.Options
    checkpointer: object = None  # _checkpoint.Checkpointer once something is set up with checkpoint_dir
    node_rank: int = 0  # this host's index among the job's hosts (GROUP_RANK)

    @property
    def distributed(self):
        return self.world_size > 1 and dist.is_initialized()

    def checkpoints(self):
        """The checkpointer, made on first use; None without checkpoint_dir, and in a trial of
        nano-run --tune (NANO_TUNE_TRIAL=1), which leaves the user's folder as it is: not made,
        not claimed, never written (as the C++ API's)."""
        if os.environ.get("NANO_TUNE_TRIAL") == "1":
            return None
        if self.checkpointer is None and self.options.checkpoint:
            from ._checkpoint import Checkpointer
            self.checkpointer = Checkpointer(self, self.options.checkpoint)
        return self.checkpointer


def world_from_environment(options):
    """The world of a rank whose launcher set torchrun's variables (RANK, WORLD_SIZE, ...)."""
    return World(rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),
                 local_rank=int(os.environ.get("LOCAL_RANK", "0")), options=options,
                 node_rank=int(os.environ.get("GROUP_RANK", "0")))


def outer_world(options):
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
    world = world_from_environment(options)
    if world.world_size > 1 and not dist.is_initialized():
        from . import BACKEND  # noqa: F401 - registers "nano" and "nano://"
        dist.init_process_group(options.process_group_backend, timeout=options.timeout)
    return world


def single_world(options):
    """This process alone."""
    return World(rank=0, world_size=1, local_rank=0, options=options)


def world_for_call(options):
    """The world a train() or decorated call trains in without launching: an outer launcher's, or
    this process alone at num_processes=1; None when the call launches its ranks."""
    world = outer_world(options)
    if world is None and options.num_processes == 1:
        world = single_world(options)
    return world


def setup(model, optimizers, world):
    """(model, [optimizers]) as setup() hands them back (see the module's docstring)."""
    if isinstance(model, _model.NanoModule):
        raise ValueError("nano_torch: setup() got a model it set up already: pass your own module (each model once)")
    if any(isinstance(o, _optimizer.NanoOptimizer) for o in optimizers):
        raise ValueError("nano_torch: setup() got an optimizer it set up already: pass your own optimizer")
    options = world.options
    _model.format_module(model, options)
    forward = model
    if world.distributed:
        forward = torch.nn.parallel.DistributedDataParallel(
            model, find_unused_parameters=options.find_unused_parameters)
    if options.use_ipex:
        forward, optimizers = _ipex.optimize(forward, optimizers, options)
    _timeline.watch_model(forward)
    checkpoints = world.checkpoints()
    if checkpoints and not any(m is model for m in checkpoints.models):
        checkpoints.models.append(model)
    lr_world = _loader.batch_world_size(world.world_size)  # an elastic world may keep the first one's batch
    wrapped = [_optimizer.wrap(o, options.auto_lr, lr_world, options.auto_lr_warmup_steps, world.distributed)
               for o in optimizers]
    if checkpoints:
        for o in wrapped:  # an optimizer set up again takes its earlier wrapper's place
            same = [i for i, c in enumerate(checkpoints.optimizers) if c.optimizer is o.optimizer]
            if same:
                checkpoints.optimizers[same[0]] = o
            else:
                checkpoints.optimizers.append(o)
    return _model.NanoModule(model, forward, options), wrapped


def is_model(value):
    """A model among a function's arguments: a module with parameters that is not a loss."""
    return (isinstance(value, torch.nn.Module) and not isinstance(value, torch.nn.modules.loss._Loss)
            and any(True for _ in value.parameters()))
