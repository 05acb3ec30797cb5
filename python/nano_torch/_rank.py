"""One rank of a Python launch: `python -m nano_torch._rank JOB BACKEND TIMEOUT_SECONDS`, started
by nano's launcher (_launch.py). It joins the ranks' process group, gets the shipped training
(from the job folder, or from a rank that has it when its host has not), runs it, and hands
rank 0's result (the return value and the shipped models' and optimizers' trained state) to the
lowest rank on the caller's host, which writes it into the job folder.
A rank that raises writes what it raised for the caller and exits 1; the launcher stops the
others."""
import datetime
import os
import random
import sys
import traceback

import torch
import torch.distributed as dist

from . import _launch


def _world(options):
    from ._setup import World
    return World(rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]),
                 local_rank=int(os.environ.get("LOCAL_RANK", "0")), options=options)


def run_payload(payload, world):
    """Runs the training of `payload` in this process as `world`; its return value."""
    if payload["kind"] == "lite":
        target = payload["target"]
        target._nano_world = world
        return payload["train"](target, *payload["args"], **payload["kwargs"])
    from .lite import call_decorated
    return call_decorated(payload["function"], payload["args"], payload["kwargs"], world)


def _write(path, value, tensors=False):
    """`value` into `path` whole (renamed into place). tensors: a dict whose "states" hold
    tensors, written by torch.save (storages as they are, far faster than pickling them) with the
    rest cloudpickled."""
    import cloudpickle
    with open(path + ".part", "wb") as f:
        if tensors:
            torch.save(dict(value, value=cloudpickle.dumps(value["value"])), f)
        else:
            cloudpickle.dump(value, f)
    os.replace(path + ".part", path)


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


def _shared(job, world):
    """The payload's bytes on every rank. Ranks on another host than the caller's have no job
    folder: the lowest rank that has it sends them. Returns (bytes, that rank)."""
    path = os.path.join(job, _launch.PAYLOAD)
    here = os.path.exists(path)
    if world.world_size == 1:
        flags = [here]
    else:
        flags = [None] * world.world_size
        dist.all_gather_object(flags, here)
    if not any(flags):
        raise RuntimeError("nano_torch: no rank runs on the caller's host, where the training waits to be sent: "
                           "list that host among hosts=")
    source = flags.index(True)
    data = None
    if here:
        with open(path, "rb") as f:
            data = f.read()
    if not all(flags):
        box = [data]
        dist.broadcast_object_list(box, src=source)
        data = box[0]
    return data, source


def main(job, backend, timeout_seconds):
    """The rank's life: join the process group (`backend`, every collective bounded by
    `timeout_seconds`), get the payload, train, hand rank 0's result to the caller's host."""
    import cloudpickle
    rank = int(os.environ.get("RANK", "-1"))
    try:
        # An earlier attempt's report (max_restarts) must not stand for this one's.
        if os.path.exists(os.path.join(job, f"error.{rank}")):
            os.unlink(os.path.join(job, f"error.{rank}"))
        world = _world(None)  # its options come with the payload
        if world.world_size > 1:
            from . import BACKEND  # noqa: F401 - importing the package registers "nano" and "nano://"
            dist.init_process_group(backend, init_method="nano://", rank=world.rank, world_size=world.world_size,
                                    timeout=datetime.timedelta(seconds=float(timeout_seconds)))
        data, writer = _shared(job, world)
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
            for path, obj in objects.items():
                if value is obj or getattr(value, "_nano_module", None) is obj:
                    value = ("nano_torch.shipped", path)
            result = {"value": value, "states": _launch.states_of(objects)}
        if writer != 0:  # rank 0 is on another host than the caller: its result travels to the writer
            box = [cloudpickle.dumps(result) if world.rank == 0 else None]  # by value, as the payload
            dist.broadcast_object_list(box, src=0)
            result = cloudpickle.loads(box[0])
        if world.rank == writer:
            _write(os.path.join(job, _launch.RESULT), result, tensors=True)
        if dist.is_initialized():
            dist.destroy_process_group()
    except BaseException as e:  # noqa: BLE001 - whatever ends the rank is reported to the caller
        text = _own_traceback(e)
        sys.stderr.write(text)
        sys.stderr.flush()
        try:
            _record(e, text)
            if os.path.isdir(job):
                _write(os.path.join(job, f"error.{rank}"),
                       {"type": type(e).__name__, "message": str(e), "traceback": text})
        except Exception:  # noqa: BLE001 - the launcher still reports the exit
            pass
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
