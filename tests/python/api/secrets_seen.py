"""What another user of this host sees of a launch's secrets: while the ranks of a 2-rank
@nano(distributed_backend=BACKEND) launch run, rank 0 reads the secrets it was started with (the
Python launch's key, the job's secret) from its own first environment and looks for each in the
command line of every process on the host (its shims, mpirun, orted/prted, the ranks, the caller).
Prints one JSON line: {"secrets": [names found], "shown": [command lines holding one]}.
Usage: secrets_seen.py BACKEND"""
import json
import os
import sys

import torch

from nano_torch import nano

SECRETS = (b"NANO_PYTHON_KEY", b"NANO_JOB_SECRET")


@nano(num_processes=2, distributed_backend=sys.argv[1])
def look(model):
    with open("/proc/self/environ", "rb") as f:  # as the rank was started, whatever it unset since
        started = dict(v.split(b"=", 1) for v in f.read().split(b"\0") if b"=" in v)
    secrets = {name: started[name] for name in SECRETS if started.get(name)}
    shown = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                line = f.read()
        except OSError:
            continue
        if any(value in line for value in secrets.values()):
            shown.append(line.replace(b"\0", b" ").decode(errors="replace")[:300])
    return sorted(name.decode() for name in secrets), shown


names, shown = look(torch.nn.Linear(1, 1))
print(json.dumps({"secrets": names, "shown": shown}))
