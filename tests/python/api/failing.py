"""Ways a Python launch fails, for api_test.py. Usage: failing.py MODE
  raise        rank 1 raises ValueError inside the training: RankFailedError in the caller
  kill         rank 1 is SIGKILLed inside the training
  unpicklable  the decorated function holds a lock: TypeError naming it, nothing started
  sleep        every rank sleeps (rank 0 prints SLEEPING first): the test interrupts the caller
Prints "CAUGHT <type>" and what it caught, as JSON."""
import json
import os
import signal
import sys
import threading
import time

import torch

from nano_torch import RankFailedError, nano

MODE = sys.argv[1]
LOCK = threading.Lock()


def deep_failure(rank):
    raise ValueError(f"boom at rank {rank}")


@nano(num_processes=2)
def training(model, steps):
    rank = int(os.environ["RANK"])
    if MODE == "raise" and rank == 1:
        deep_failure(rank)
    if MODE == "kill" and rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    if MODE == "sleep":
        if rank == 0:
            print("SLEEPING", flush=True)
        time.sleep(600)
    torch.distributed.barrier()
    return steps


@nano(num_processes=2)
def locked_training(model):
    with LOCK:
        return 1


try:
    (locked_training(torch.nn.Linear(2, 2)) if MODE == "unpicklable" else training(torch.nn.Linear(2, 2), 3))
    print("RETURNED")
except RankFailedError as e:
    print("CAUGHT RankFailedError")
    print(json.dumps({"rank": e.rank, "type": e.exc_type, "message": e.message, "traceback": e.traceback,
                      "signal": e.signal, "text": str(e), "is_runtime_error": isinstance(e, RuntimeError)}))
except TypeError as e:
    print("CAUGHT TypeError")
    print(json.dumps({"text": str(e)}))
