#!/usr/bin/python3
"""A progress bar redrawn with carriage returns (as tqdm draws one) moves live under nano-run:
rank 0's first state reaches nano-run's stderr while the rank is still running (it waits for
this test to have seen it), in place ("\\r[rank 0] ..."), and the finished line ends in place
with its newline. Rank 1, left out by --output-ranks 0, draws nothing. Bounded: every wait
has a deadline. Prints "PASS: ..." or "FAIL: why" (exit 1).
Usage: progress_live.py NANO_RUN"""
import os
import select
import subprocess
import sys
import tempfile
import time

nano_run = sys.argv[1]


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


with tempfile.TemporaryDirectory(prefix="nano-progress-") as tmp:
    seen = os.path.join(tmp, "seen")
    rank = (
        "import os, sys, time\n"
        "sys.stderr.write('\\r 10%|#'); sys.stderr.flush()\n"
        "deadline = time.monotonic() + 30\n"
        f"while not os.path.exists({seen!r}) and time.monotonic() < deadline: time.sleep(0.02)\n"
        "sys.stderr.write('\\r 50%|#####\\r100%|##########|\\n'); sys.stderr.flush()\n")
    p = subprocess.Popen([nano_run, "-n", "2", "--output-ranks", "0", sys.executable, "-c", rank],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    got, deadline = b"", time.monotonic() + 30
    while b"\r[rank 0]  10%|#" not in got and time.monotonic() < deadline:
        ready, _, _ = select.select([p.stderr], [], [], 0.2)
        if ready:
            chunk = os.read(p.stderr.fileno(), 4096)
            if not chunk:
                break
            got += chunk
    live = b"\r[rank 0]  10%|#" in got
    open(seen, "w").close()
    try:
        rest = p.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        p.kill()
        fail("nano-run did not end within 60 s")
    got += rest
    if not live:
        fail(f"the bar's first state did not arrive while the rank ran: {got!r}")
    if p.returncode != 0:
        fail(f"nano-run exited {p.returncode}: {got!r}")
    if b"\r[rank 0] 100%|##########|\n" not in got:
        fail(f"the finished bar did not end in place: {got!r}")
    if b"rank 1" in got:
        fail(f"rank 1's bar was drawn although --output-ranks 0: {got!r}")
print("PASS: a carriage-return progress line moves live under nano-run")
