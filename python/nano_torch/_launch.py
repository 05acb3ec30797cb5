"""The caller's side of a Python launch: the training (the function, its arguments, the
TorchNano instance) shipped by value to the ranks, the ranks started through the extension
(nano's launcher), and rank 0's result brought back: its return value and the trained state of
every model and optimizer the caller handed over, loaded into the caller's own objects. What
crosses between the caller and its ranks is sealed with the launch's key (_handoff.py)."""
import io
import json
import os
import shutil
import signal
import sys
import tempfile

import torch

from . import _C, _handoff

PAYLOAD = "payload.pkl"
RESULT = "result.pkl"


class RankFailedError(RuntimeError):
    """A rank of a TorchNano training or an @nano call failed; the other ranks were stopped.
    rank, host, exc_type ("ValueError"), message and traceback (the rank's, as text) say what
    happened; exc_type is "" when the rank died without raising (a signal, an exit)."""

    def __init__(self, rank, host, exc_type, message, traceback, exit_code=None, signal_number=0):
        where = f"rank {rank}" + (f" (host {host})" if host else "")
        if exc_type:
            text = f"{where} raised {exc_type}: {message}"
        elif signal_number:
            text = f"{where} was killed by {signal.Signals(signal_number).name}"
        else:
            text = f"{where} exited with code {exit_code}" + (f": {message}" if message else "")
        super().__init__(text + (f"\n\nThe rank's traceback:\n{traceback}" if traceback else ""))
        self.rank, self.host, self.exc_type, self.message = rank, host, exc_type, message
        self.traceback, self.exit_code, self.signal = traceback, exit_code, signal_number


def shipped(payload):
    """Pure: {path: object} of the models and optimizers in what the caller hands the ranks (the
    arguments, the keyword arguments, the TorchNano instance's attributes; one list or tuple deep).
    Computed on both sides before training, so a path names the same object in the caller and in
    the ranks."""
    found = {}

    def visit(path, value, deeper):
        if isinstance(value, (torch.nn.Module, torch.optim.Optimizer)):
            found[path] = value
        elif deeper and isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                visit(path + (i,), item, False)

    for i, value in enumerate(payload.get("args", ())):
        visit(("arg", i), value, True)
    for key, value in payload.get("kwargs", {}).items():
        visit(("kwarg", key), value, True)
    target = payload.get("target")
    if target is not None:
        for key, value in vars(target).items():
            visit(("attr", key), value, True)
    return found


def states_of(objects):
    """{path: state_dict} of shipped objects, in a form that crosses processes. An optimizer's hold
    the user's own rates (auto_lr's factor applies only inside step()), so another call warms up
    from them again."""
    return {path: obj.state_dict() for path, obj in objects.items()}


def load_states(objects, states):
    """The ranks' trained states into the caller's objects: the models first, then the optimizers
    (whose state refers to the models' parameters)."""
    for kinds in (torch.nn.Module, torch.optim.Optimizer):
        for path, state in states.items():
            if isinstance(objects.get(path), kinds):
                objects[path].load_state_dict(state)


# Tensors at least this large (an in-memory dataset) reach the ranks through shared memory.
SHARED_BYTES = 1 << 20


def _untyped_storage(tensor):
    return tensor.untyped_storage() if hasattr(tensor, "untyped_storage") else tensor.storage().untyped()  # 2.x; 1.13


def _mapped(name, header, nbytes, dtype, size, stride, offset):
    """In a rank: a tensor over the caller's shared storage `name`, mapped copy-on-write: read by
    every rank once in memory; a rank's writes stay its own. The storage's bytes start `header`
    bytes into the file (torch keeps a reference count there)."""
    whole = torch.from_file("/dev/shm" + name, shared=False, size=header + nbytes, dtype=torch.uint8).view(dtype)
    # as_strided's offset counts from the mapping's start, in elements
    return whole.as_strided(size, stride, header // whole.element_size() + offset)


def _shareable(tensor):
    """A plain dense CPU tensor of SHARED_BYTES or more, without autograd or the bits its rebuild
    would drop (conjugate, negative, names), that fits in /dev/shm with room to spare."""
    if type(tensor) is not torch.Tensor:
        return False
    nbytes = tensor.numel() * tensor.element_size()
    if not (tensor.layout == torch.strided and tensor.device.type == "cpu" and not tensor.requires_grad
            and not tensor.is_quantized and not tensor.is_conj() and not tensor.is_neg() and not any(tensor.names)
            and nbytes >= SHARED_BYTES):
        return False
    room = os.statvfs("/dev/shm")
    return nbytes * 2 < room.f_bavail * room.f_frsize  # a small /dev/shm (a container's): as bytes


def _pickler_type():
    import cloudpickle  # by value: functions and classes of __main__, stdin and notebooks reach the ranks

    class Pickler(cloudpickle.Pickler):
        """cloudpickle, with large plain tensors moved into named shared memory in place (their
        storage, so every view follows, as torch.multiprocessing does) and sent by name. A
        model's parameters are sent as bytes: every rank trains its own copy."""

        share = True

        def __init__(self, file):
            super().__init__(file)
            self._parameters = set()

        def reducer_override(self, obj):
            if isinstance(obj, torch.nn.Parameter):
                self._parameters.add(obj.data_ptr())
            elif self.share and _shareable(obj) and obj.data_ptr() not in self._parameters:
                storage = _untyped_storage(obj)
                _, name, nbytes = storage._share_filename_cpu_()  # torch's file_system sharing: /dev/shm/NAME
                name = name.decode() if isinstance(name, bytes) else name
                header = os.path.getsize("/dev/shm" + name) - nbytes
                return _mapped, (name, header, nbytes, obj.dtype, tuple(obj.size()), tuple(obj.stride()),
                                 obj.storage_offset())
            return super().reducer_override(obj)

    return Pickler


def _dumps(payload, what, share):
    import io
    buffer = io.BytesIO()
    try:
        pickler = _pickler_type()(buffer)
        pickler.share = share
        pickler.dump(payload)
    except Exception as e:  # noqa: BLE001 - pickling raises many types; all mean the same to the caller
        raise TypeError(f"nano_torch: cannot send {what} to the ranks: {type(e).__name__}: {e}") from None
    return buffer.getvalue()


def _failure(job, key, result):
    rank = result.get("rank", -1)
    error = os.path.join(job, f"error.{rank}")
    raised = result.get("raised", "")
    if rank >= 0 and not os.path.lexists(error) and raised:
        # A rank on another host: what the launcher brought back ("ValueError: boom (at f.py:3 in g)").
        kind, _, message = raised.partition(": ")
        if message.endswith(")") and " (at " in message:  # the launcher adds where it was raised
            message = message.rpartition(" (at ")[0]
        return RankFailedError(rank, result.get("host", ""), kind, message, result.get("stderr_tail", ""),
                               result.get("rank_exit_code"))
    if rank >= 0 and os.path.lexists(error):
        raised = json.loads(_handoff.unseal(key, "error", _handoff.read_file(error), error))
        return RankFailedError(rank, result.get("host", ""), raised["type"], raised["message"], raised["traceback"],
                               result.get("rank_exit_code"))
    if rank < 0:
        return RankFailedError(rank, "", "", "the launch failed before any rank did", "", result["exit_code"])
    return RankFailedError(rank, result.get("host", ""), "", result.get("lost", ""), "",
                           result.get("rank_exit_code"), result.get("signal", 0))


# How a rank's Python starts: nano_torch._rank as `python -m` would run it, but with the caller's
# sys.path alone (PYTHONPATH, above). `-m` would put the working folder first, where another user
# may have planted a nano_torch or a torch of theirs (a shared scratch folder, /tmp); `-c` puts ''
# there, removed before anything is imported.
RANK_MAIN = ("import sys\nif sys.path and sys.path[0] == '':\n    del sys.path[0]\nimport runpy\n"
             "runpy.run_module('nano_torch._rank', run_name='__main__', alter_sys=True)")


def launch(payload, what, options):
    """Runs `payload` (see _rank.py) in options.num_processes ranks and returns rank 0's value,
    with the shipped models and optimizers of the caller holding rank 0's trained state.
    Raises RankFailedError when a rank failed, KeyboardInterrupt when the caller was interrupted."""
    if not hasattr(_C, "launch"):
        raise RuntimeError("nano_torch: this nano_torch was built without nano's launcher (for a pip torch, by "
                           "build_nano_torch.py): run the program under nano-run, torchrun or mpirun, or with "
                           "num_processes=1")
    objects = shipped(payload)
    # Named shared memory is this host's: across hosts every tensor travels as bytes. mpirun in a
    # Slurm allocation of several nodes spreads the ranks over them.
    one_host = (not options.launch.get("hosts") and not options.launch.get("hostfile")
                and not (options.launch.get("distributed_backend") == "mpi"
                         and int(os.environ.get("SLURM_JOB_NUM_NODES", "1")) > 1))
    data = _dumps(dict(payload, options=options, seed=torch.initial_seed()), what, one_host)
    key = _handoff.new_key()
    job = tempfile.mkdtemp(prefix="nano-python-")  # 0700, a fresh name: the caller's own
    try:
        _handoff.write_file(os.path.join(job, PAYLOAD), _handoff.seal(bytes.fromhex(key), "payload", data))
        del data
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        # The ranks import what the caller can: the same sys.path (the script's folder included).
        path = os.pathsep.join([package] + [p or os.getcwd() for p in sys.path])
        sys.stdout.flush()
        sys.stderr.flush()
        # A pip-installed package carries nano-run, the rank shim of distributed_backend="mpi".
        packaged = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_nano", "bin", "nano-run")
        if os.path.exists(packaged):
            os.environ.setdefault("NANO_RUN", packaged)
        env = {"PYTHONPATH": path, _handoff.KEY_VARIABLE: key}
        claim = None
        if options.checkpoint and os.environ.get("NANO_TUNE_TRIAL") != "1":  # a trial leaves the folder alone
            # The caller owns the checkpoint folder for the whole launch, restarts included, as
            # nano::TorchNano's does; its ranks carry its job identity, so rank 0 finds the claim its own.
            _C.CheckpointFolder(options.checkpoint["dir"], True, options.checkpoint["shared"])  # made 0700, keyed
            claim = _C.FolderClaim(options.checkpoint["dir"])
            env["NANO_CHECKPOINT_JOB"] = _C.checkpoint_job_id()
        if one_host:
            # The ranks' temporary files go with the job, also those of a rank that was killed
            # (torch 2.x's distributed package makes a temporary folder that only its exit removes).
            env["TMPDIR"] = os.path.join(job, "tmp")
            os.mkdir(env["TMPDIR"])
        result = _C.launch(options.launch, list(options.output_ranks),
                           [sys.executable, "-c", RANK_MAIN, job, options.process_group_backend,
                            str(options.timeout.total_seconds())], env, [job])
        del claim  # released with the launch: the ranks have ended
        if result["exit_code"] != 0:
            if result["interrupted_by"] == signal.SIGINT:
                raise KeyboardInterrupt
            if result["interrupted_by"]:
                raise RuntimeError(f"nano_torch: the launch was stopped by "
                                   f"{signal.Signals(result['interrupted_by']).name}; every rank has ended")
            raise _failure(job, bytes.fromhex(key), result)
        import cloudpickle
        path = os.path.join(job, RESULT)
        data = _handoff.unseal(bytes.fromhex(key), "result", _handoff.read_file(path), path)
        # Sealed by this launch's rank (checked above), so unpickled: torch.save's dict, the value cloudpickled.
        out = torch.load(io.BytesIO(data), weights_only=False)
        del data
        out["value"] = cloudpickle.loads(out["value"])
    finally:
        shutil.rmtree(job, ignore_errors=True)
    load_states(objects, out["states"])
    value = out["value"]
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "nano_torch.shipped":
        value = objects[value[1]]
    return value
