"""One rank of a fault case on the `nano` backend (group timeout 3 s). Rank 1 (or FAULT_RANK)
misbehaves:
  kill   SIGKILLs itself while an all_reduce of 16 MB is in flight
  stop   SIGSTOPs itself while an all_reduce is in flight (the test ends it later)
  absent never joins: sleeps before init_process_group
The others do the same all_reduces; their error reaches stderr (exit 1).
Every rank that joins first waits until each joining rank has imported torch (a file each in
NANO_TEST_SYNC_DIR): on a loaded machine one rank's imports can take seconds longer than its
peer's, which the 3 s bound of the rendezvous would then report as a rank that did not join.
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
faulty = int(os.environ.get("FAULT_RANK", "1"))
if case == "absent" and rank == faulty:
    time.sleep(120)
sync = os.environ["NANO_TEST_SYNC_DIR"]
open(os.path.join(sync, f"rank-{rank}"), "w").close()
world = int(os.environ["WORLD_SIZE"])
joining = [r for r in range(world) if not (case == "absent" and r == faulty)]
deadline = time.monotonic() + 60
while not all(os.path.exists(os.path.join(sync, f"rank-{r}")) for r in joining):
    if time.monotonic() > deadline:
        sys.exit(f"rank {rank}: the other ranks did not import torch within 60 s")
    time.sleep(0.01)
dist.init_process_group("nano", timeout=datetime.timedelta(seconds=3))
x = torch.ones(4 << 20)
for i in range(3):
    dist.all_reduce(x)
print(f"rank {rank} ready", flush=True)
work = dist.all_reduce(x, async_op=True)
if rank == faulty and case == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if rank == faulty and case == "stop":
    os.kill(os.getpid(), signal.SIGSTOP)
work.wait()
for i in range(100):
    dist.all_reduce(x)
print(f"rank {rank} finished", flush=True)
