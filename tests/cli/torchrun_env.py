# A stock PyTorch program that reads torchrun's whole worker environment: it prints one JSON line
# of what it sees, then (on the first attempt of a restarted run) rank 1 raises inside a
# function decorated with torch.distributed.elastic's @record, which writes the exception to
# TORCHELASTIC_ERROR_FILE for nano-run's root-cause report.
#   torchrun_env.py [--fail-first-attempt]
import json
import os
import stat
import sys
import time

import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

NAMES = [
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_ERROR_FILE", "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ENABLE_FILE_TIMER",
    "TORCHELASTIC_TIMER_FILE", "NANO_JOB_ID", "NANO_RESTART_COUNT", "PYTHONPATH",
]


def error_folder_mode():
    folder = os.path.dirname(os.environ.get("TORCHELASTIC_ERROR_FILE", "/nonexistent/x"))
    try:
        st = os.lstat(folder)
    except OSError:
        return None
    return oct(stat.S_IMODE(st.st_mode)) if stat.S_ISDIR(st.st_mode) else "not a folder"


def fail(attempt):
    raise RuntimeError(f"boom on attempt {attempt}")


@record
def main():
    # The env:// rendezvous works as under torchrun (rank 0 hosts the store: no agent store).
    dist.init_process_group("gloo", init_method="env://")
    try:
        import nano_marker  # noqa: F401  (only in nano's Python folder, when the test made one)
        marker = True
    except ImportError:
        marker = False
    seen = {name: os.environ.get(name) for name in NAMES}
    seen["elastic_launched"] = dist.is_torchelastic_launched()
    seen["error_folder_mode"] = error_folder_mode()
    seen["nano_marker"] = marker
    print(json.dumps(seen), flush=True)
    dist.barrier()  # every rank has printed before any fails
    attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
    if "--fail-first-attempt" in sys.argv and attempt == "0":
        if dist.get_rank() == 1:
            fail(attempt)
        time.sleep(60)  # ended by nano-run's teardown
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
