"""One rank of a fault case on the `nano` backend (group timeout 3 s). Rank 1 misbehaves:
  kill   SIGKILLs itself while an all_reduce of 16 MB is in flight
  stop   SIGSTOPs itself while an all_reduce is in flight (the test ends it later)
  absent never joins: sleeps before init_process_group
The others do the same all_reduces; their error reaches stderr (exit 1).
Usage: faults_check.py kill|stop|absent
"""
import datetime
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

import nano_torch  # noqa: F401

case = sys.argv[1]
rank = int(os.environ["RANK"])
if case == "absent" and rank == 1:
    time.sleep(120)
dist.init_process_group("nano", timeout=datetime.timedelta(seconds=3))
x = torch.ones(4 << 20)
for i in range(3):
    dist.all_reduce(x)
print(f"rank {rank} ready", flush=True)
work = dist.all_reduce(x, async_op=True)
if rank == 1 and case == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if rank == 1 and case == "stop":
    os.kill(os.getpid(), signal.SIGSTOP)
work.wait()
for i in range(100):
    dist.all_reduce(x)
print(f"rank {rank} finished", flush=True)
