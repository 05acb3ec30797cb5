"""A payload planted on a remote host, where the caller's job folder would be if it were there:
@nano with distributed_backend "mpi" called on hostA for ranks on hostB and hostC only. The job
folder's name is made known in advance (tempfile.mkdtemp replaced: the same user plants, so what
this shows is that no rank reads a job folder the launcher did not place it beside), and a pickle
that would make MARKER waits at that path on hostB. No rank runs on the caller's host, so the
call must fail saying so, and nothing of the planted file may run.
Prints "refused TYPE: FIRST LINE" (or "ran") and "marker True|False".
Usage: python_planted.py JOB_FOLDER MARKER"""
import os
import sys
import tempfile

JOB, MARKER = sys.argv[1], sys.argv[2]


def known_folder(*args, **kwargs):
    os.mkdir(JOB, 0o700)
    return JOB


tempfile.mkdtemp = known_folder

import torch  # noqa: E402

from nano_torch import nano  # noqa: E402 - after the replacement, which _launch uses


@nano(num_processes=2, distributed_backend="mpi", hosts="hostB:1,hostC:1", auto_lr=False)
def train(model):
    return 1


try:
    print("ran", train(torch.nn.Linear(2, 2)))
except Exception as e:  # noqa: BLE001 - what the caller sees is the result
    print(f"refused {type(e).__name__}: {str(e).splitlines()[0]}")
print("marker", os.path.exists(MARKER))
sys.stdout.flush()
