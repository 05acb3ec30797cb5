"""One rank of a Python launch: run as `python -m nano_torch._rank JOB BACKEND TIMEOUT_SECONDS`
would be, with the caller's sys.path alone (_launch.RANK_MAIN), by nano's launcher (_launch.py).
It joins the ranks' process group, gets the shipped training (from the job folder when the
launcher placed it on the caller's host, else from the lowest rank there), runs it, and hands
rank 0's result (the return value and the shipped models' and optimizers' trained state) to that
lowest rank, which writes it into the job folder. Everything is sealed with the launch's key and
checked before it is unpickled (_handoff.py). A rank that raises writes what it raised for the
caller and exits 1; the launcher stops the others."""
import datetime
import io
import json
import os
import random
import sys
import traceback

import torch
import torch.distributed as dist

from . import _handoff, _launch, _tensor_wire
from ._optimizer import unwrapped


def _world(options):
    from ._setup import world_from_environment
    return world_from_environment(options)


def run_payload(payload, world):
    """Runs the training of `payload` in this process as `world`; its return value."""
    if payload["kind"] == "lite":
        target = payload["target"]
        target._nano_world = world
        return payload["train"](target, *payload["args"], **payload["kwargs"])
    from ._decorator import call_decorated
    return call_decorated(payload["function"], payload["args"], payload["kwargs"], world)


def _result_bytes(result):
    """Rank 0's result as the caller loads it: torch.save (storages as they are, far faster than
    pickling them), the return value cloudpickled."""
    import cloudpickle
    buffer = io.BytesIO()
    torch.save(dict(result, value=cloudpickle.dumps(result["value"])), buffer)
    return buffer.getvalue()


def _own_traceback(error):
    """The traceback from the first frame outside nano_torch on: the user's code's."""
    here = os.path.dirname(os.path.abspath(__file__))
    tb = error.__traceback__
    while tb is not None and os.path.dirname(os.path.abspath(tb.tb_frame.f_code.co_filename)) == here:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(error), error, tb or error.__traceback__))


def _record(error, text):
    """What the rank raised, in torch's error-file format, where the launcher asked for one
    (TORCHELASTIC_ERROR_FILE): it reaches the caller from any host, with the launcher's report."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    import json
    import time
    with open(path, "w") as f:
        json.dump({"message": {"message": f"{type(error).__name__}: {error}",
                               "extraInfo": {"py_callstack": text, "timestamp": str(int(time.time()))}}}, f)


def _on_caller_host_ranks(world):
    """Which ranks the launcher placed on the caller's host, as every rank sees it. Gathered as
    a tensor: nothing that crosses hosts here is unpickled."""
    here = torch.tensor([1 if _handoff.on_caller_host() else 0], dtype=torch.int64)
    if world.world_size == 1:
        return [bool(here.item())]
    flags = [torch.zeros(1, dtype=torch.int64) for _ in range(world.world_size)]
    dist.all_gather(flags, here)
    return [bool(f.item()) for f in flags]


def _shared(job, world, key):
    """The payload's bytes on every rank: read from the job folder by the lowest rank the launcher
    placed on the caller's host, sent on to the others. Returns (bytes, that rank)."""
    flags = _on_caller_host_ranks(world)
    if not any(flags):
        raise RuntimeError("nano_torch: no rank runs on the caller's host, where the training waits to be sent: "
                           "list that host among hosts=")
    source = flags.index(True)
    sealed = data = None
    if world.rank == source:  # checked before anything is sent: a refusal here is the root cause
        _handoff.check_private_folder(job)
        path = os.path.join(job, _launch.PAYLOAD)
        sealed = _handoff.read_file(path)
        data = _handoff.unseal(key, "payload", sealed, path)
    if world.world_size > 1:
        sealed = _tensor_wire.broadcast_bytes(sealed, source)
    if world.rank != source:
        data = _handoff.unseal(key, "payload", sealed, f"the payload from rank {source}")
    return data, source


def main(job, backend, timeout_seconds):
    """The rank's life: join the process group (`backend`, every collective bounded by
    `timeout_seconds`), get the payload, train, hand rank 0's result to the caller's host."""
    import cloudpickle
    rank = int(os.environ.get("RANK", "-1"))
    key = None
    try:
        key = _handoff.key_from_environment()
        if _handoff.on_caller_host():
            _handoff.check_private_folder(job)
            # An earlier attempt's report (max_restarts) must not stand for this one's.
            if os.path.lexists(os.path.join(job, f"error.{rank}")):
                os.unlink(os.path.join(job, f"error.{rank}"))
        world = _world(None)  # its options come with the payload
        if world.world_size > 1:
            from . import BACKEND  # noqa: F401 - importing the package registers "nano" and "nano://"
            dist.init_process_group(backend, init_method="nano://", rank=world.rank, world_size=world.world_size,
                                    timeout=datetime.timedelta(seconds=float(timeout_seconds)))
        data, writer = _shared(job, world, key)
        payload = cloudpickle.loads(data)
        del data
        world.options = payload["options"]
        objects = _launch.shipped(payload)
        # Every rank's generators start from the caller's seed, as a program that calls
        # torch.manual_seed(seed) in every rank: runs repeat, and a resumed run can equal one that
        # was not interrupted.
        torch.manual_seed(payload["seed"])
        random.seed(payload["seed"])
        value = run_payload(payload, world)
        result = None
        if world.rank == 0:
            for path, obj in objects.items():  # the caller gets its own object back, trained
                if value is obj or getattr(value, "_nano_module", None) is obj or unwrapped(value) is obj:
                    value = ("nano_torch.shipped", path)
            result = {"value": value, "states": _launch.states_of(objects)}
        if writer != 0:  # rank 0 is on another host than the caller: its result travels to the writer
            sealed = _tensor_wire.broadcast_bytes(_handoff.seal(key, "result", cloudpickle.dumps(result)) if world.rank == 0
                                      else None, 0)
            if world.rank == writer:
                result = cloudpickle.loads(_handoff.unseal(key, "result", sealed, "rank 0's result"))
        if world.rank == writer:
            _handoff.write_file(os.path.join(job, _launch.RESULT), _handoff.seal(key, "result", _result_bytes(result)))
        if dist.is_initialized():
            dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 - whatever ends the rank is reported to the caller
        text = _own_traceback(e)
        sys.stderr.write(text)
        sys.stderr.flush()
        try:
            _record(e, text)
            if key is not None and _handoff.on_caller_host():
                _handoff.check_private_folder(job)
                report = json.dumps({"type": type(e).__name__, "message": str(e), "traceback": text}).encode()
                _handoff.write_file(os.path.join(job, f"error.{rank}"), _handoff.seal(key, "error", report))
        except Exception:  # noqa: BLE001 - the launcher still reports the exit
            pass
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
