#!/usr/bin/env python3
"""A chaos soak of one host (scripts/soak.sh runs it): fashion_mnist_nano on real data, equal
batches, checkpoints and --max-restarts, with faults at random moments from a seeded schedule:
SIGKILL, SIGSTOP (ended by the collective timeout), SIGSEGV or SIGTERM of a random rank, and a
checkpoint folder that fills up for a while (a small tmpfs in this process's private mount
namespace, when it has one). Each fault that ends an attempt waits for the next attempt's ranks
before the next fault, so faults land during start-up, rendezvous, restore, training and
checkpoint writes alike. Then it checks: the final weights are bit-identical to an uninterrupted
run with the same seed; the restarts equal the faults that ended an attempt; no process and no
file of the job is left. Prints the schedule and a fault -> time-to-resume table; exits 1 with
"FAIL: ..." lines when a check fails."""
import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

ENDING = {"kill": signal.SIGKILL, "stop": signal.SIGSTOP, "segv": signal.SIGSEGV, "term": signal.SIGTERM}


def environ_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            pairs = [item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item]
        return {k.decode(): v.decode(errors="replace") for k, v in pairs}
    except OSError:
        return None


def cmdline_of(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def job_processes(marker):
    """pid -> environ of every process whose command line holds `marker` (the job's folder)."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and marker in cmdline_of(name):
            env = environ_of(name)
            if env is not None:
                found[int(name)] = env
    return found


def ranks_of_attempt(marker, attempt):
    """rank -> pid of the ranks of `attempt` (NANO_RESTART_COUNT) now running."""
    ranks = {}
    for pid, env in job_processes(marker).items():
        if "RANK" in env and env.get("NANO_RESTART_COUNT", "0") == str(attempt):
            ranks[int(env["RANK"])] = pid
    return ranks


class Output:
    """The job's output, read on a thread, each line with its time."""

    def __init__(self, stream):
        self.lines = []
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for raw in stream:
            with self.lock:
                self.lines.append((time.monotonic(), raw.decode(errors="replace").rstrip("\n")))

    def count(self, pattern):
        with self.lock:
            return sum(1 for _, line in self.lines if re.search(pattern, line))

    def first_after(self, pattern, since):
        with self.lock:
            for t, line in self.lines:
                if t >= since and re.search(pattern, line):
                    return t
        return None

    def text(self):
        with self.lock:
            return "\n".join(line for _, line in self.lines)


def training_args(program, ckpt, epochs, steps, seed_args):
    return [program, "--num-processes", "2", "--epochs", str(epochs), "--max-steps-per-epoch", str(steps),
            "--batch-size", "32", "--test-limit", "500", "--equal-batches", "--checkpoint-every", "10",
            "--checkpoint-dir", ckpt, "--print-weights"] + seed_args


def weights_of(text):
    m = re.findall(r"^weights ([0-9a-f]{16})$", text, re.M)
    return m[-1] if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("program", help="fashion_mnist_nano")
    ap.add_argument("--faults", type=int, default=6, help="faults to inject (default 6)")
    ap.add_argument("--seed", type=int, default=1, help="the schedule's seed (default 1)")
    ap.add_argument("--steps", type=int, default=0,
                    help="steps per epoch, at most an epoch's 938 (default: sized to the faults)")
    ap.add_argument("--epochs", type=int, default=2, help="epochs (default 2; a long soak needs more)")
    ap.add_argument("--minutes", type=float, default=0, help="keep injecting for this long (overrides --faults)")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    failures = []
    work = tempfile.mkdtemp(prefix="nano-soak-")
    ckpt = os.path.join(work, "ckpt")
    os.makedirs(ckpt)
    # A small tmpfs for the checkpoints, so that a full disk can be made for a while; only in a
    # private mount namespace (soak.sh runs this under unshare -m), never in the machine's.
    disk = False
    if os.environ.get("NANO_SOAK_PRIVATE_MOUNTS") == "1":
        disk = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m", "nano-soak", ckpt]).returncode == 0
    kinds = list(ENDING) + (["disk"] if disk else [])
    if not disk:
        print("soak: no private mount namespace here: no full-disk faults")
    target = args.faults if args.minutes <= 0 else 10**9
    steps = min(938, args.steps or max(300, 100 * min(target, 200)))  # 60000 images / 2 ranks / 32
    env = dict(os.environ, NANO_COLLECTIVE_TIMEOUT="3", NANO_RENDEZVOUS_TIMEOUT="60")

    # The uninterrupted run: the weights to reach.
    ref_dir = os.path.join(work, "ref")
    t0 = time.monotonic()
    ref = subprocess.run(training_args(args.program, ref_dir, args.epochs, steps, []), env=env, capture_output=True, text=True,
                         timeout=3600)
    ref_seconds = time.monotonic() - t0
    reference = weights_of(ref.stdout)
    if ref.returncode != 0 or not reference:
        print(ref.stdout[-2000:], ref.stderr[-2000:])
        print("FAIL: the uninterrupted run failed")
        return 1
    print(f"soak: uninterrupted run: weights {reference} in {ref_seconds:.1f} s ({args.epochs * steps} steps, 2 ranks)")

    max_restarts = (target if args.minutes <= 0 else 100000) + 2
    job = subprocess.Popen(training_args(args.program, ckpt, args.epochs, steps, ["--max-restarts", str(max_restarts)]), env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = Output(job.stdout)
    start = time.monotonic()
    deadline = start + args.minutes * 60 if args.minutes > 0 else None
    schedule = []  # (t, kind, rank, attempt, ended, resume_s)
    job_ids = set()
    attempt = 0
    pending = []
    while job.poll() is None:
        if (deadline is None and len(schedule) >= target) or (deadline is not None and time.monotonic() > deadline):
            break
        # The attempt's ranks, up (or the job over).
        ranks = {}
        wait_until = time.monotonic() + 120
        while job.poll() is None and time.monotonic() < wait_until:
            ranks = ranks_of_attempt(ckpt, attempt)
            if len(ranks) == 2:
                break
            time.sleep(0.02)
        if len(ranks) < 2:
            break
        for pid in ranks.values():
            e = environ_of(pid)
            if e and "NANO_JOB_ID" in e:
                job_ids.add(e["NANO_JOB_ID"])
        time.sleep(rng.uniform(0.0, 2.5))  # start-up, rendezvous, restore, steps, checkpoint writes
        if not pending:  # every kind once per round, in a seeded order
            pending = rng.sample(kinds, len(kinds))
        kind = pending.pop()
        if kind == "disk":
            # The folder full for a while: checkpoints due meanwhile fail in one line each and
            # training goes on (this ends no attempt).
            filler = os.path.join(ckpt, "filler")
            fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                while os.write(fd, b"\0" * (1 << 20)) > 0:
                    pass
            except OSError:
                pass  # full
            os.close(fd)
            schedule.append([time.monotonic() - start, "disk full", "-", attempt, False, None])
            time.sleep(rng.uniform(1.0, 4.0))
            os.unlink(filler)
            continue
        rank = rng.choice(sorted(ranks))
        t = time.monotonic()
        try:
            os.kill(ranks[rank], ENDING[kind])
        except ProcessLookupError:
            continue  # it ended meanwhile: not a fault
        row = [t - start, kind, rank, attempt, True, None]
        schedule.append(row)
        # The attempt ends (this fault's restart) and the next one's ranks come up.
        wait_until = time.monotonic() + 120
        while job.poll() is None and time.monotonic() < wait_until and len(ranks_of_attempt(ckpt, attempt + 1)) < 2:
            time.sleep(0.02)
        attempt += 1
        # Time to resume: to the new attempt's first sign of training: its "resuming from
        # checkpoint" line, or a progress line when no checkpoint had been written yet.
        up = time.monotonic()
        wait_until = up + 60
        resumed_at = None
        while job.poll() is None and time.monotonic() < wait_until and resumed_at is None:
            resumed_at = out.first_after(r"nano: resuming from checkpoint|batch [0-9]+/", up)
            time.sleep(0.02)
        row[5] = resumed_at - t if resumed_at else None
    rc = job.wait(timeout=3600)
    out.thread.join(timeout=10)
    seconds = time.monotonic() - start
    text = out.text()
    ended = sum(1 for r in schedule if r[4])
    restarts = len(re.findall(r"restart [0-9]+ of [0-9]+", text))

    print(f"soak: seed {args.seed}: {len(schedule)} faults ({ended} that end an attempt) in {seconds:.1f} s, "
          f"exit {rc}, {restarts} restarts")
    print(f"{'#':>3} {'t s':>7}  {'fault':<10} {'rank':>4} {'attempt':>7}  {'time to resume s':>16}")
    for i, (t, kind, rank, att, ends, resume) in enumerate(schedule, 1):
        shown = f"{resume:.2f}" if resume is not None else ("-" if not ends else "none")
        print(f"{i:>3} {t:7.1f}  {kind:<10} {rank!s:>4} {att:>7}  {shown:>16}")
    by_kind = {}
    for _, kind, _, _, ends, resume in schedule:
        if ends and resume is not None:
            by_kind.setdefault(kind, []).append(resume)
    for kind, values in sorted(by_kind.items()):
        values.sort()
        print(f"soak: {kind}: {len(values)} faults, time to resume median {values[len(values) // 2]:.2f} s, "
              f"max {values[-1]:.2f} s")

    refused = len(re.findall(r"nano: cannot write checkpoint .*No space left on device", text))
    if any(r[1] == "disk full" for r in schedule):
        print(f"soak: disk full: {refused} checkpoint writes refused in one line each, training went on")
    final = weights_of(text)
    if rc != 0:
        failures.append(f"the job exited {rc}: {text[-1500:]}")
    if final != reference:
        failures.append(f"final weights {final} differ from the uninterrupted run's {reference}")
    if restarts != ended:
        failures.append(f"{restarts} restarts for {ended} faults that ended an attempt")
    if len({r[1] for r in schedule}) < min(4, len(kinds)) and deadline is None and target >= 6:
        failures.append(f"only {sorted({r[1] for r in schedule})} kinds of fault came up")
    time.sleep(0.5)
    left = [f"{pid} {cmdline_of(pid)[:80]}" for pid in job_processes(ckpt)]
    if left:
        failures.append(f"processes left: {left}")
    shm = [n for n in os.listdir("/dev/shm") if any(n.startswith("nano-" + j) for j in job_ids)]
    if shm:
        failures.append(f"files left in /dev/shm: {shm}")
    if os.path.exists(os.path.join(ckpt, ".nano-owner")):
        failures.append("the checkpoint folder's claim was left")
    if disk:
        subprocess.run(["umount", ckpt])
    subprocess.run(["rm", "-rf", work])
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print(f"PASS: {len(schedule)} faults of {len({r[1] for r in schedule})} kinds, {restarts} restarts, "
              f"final weights {final} as the uninterrupted run's, nothing left")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
