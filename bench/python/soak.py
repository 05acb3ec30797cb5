#!/usr/bin/env python3
"""A chaos soak (scripts/soak.sh runs it): fashion_mnist_nano on real data, equal batches,
checkpoints and --max-restarts, with faults at random moments from a seeded schedule: SIGKILL,
SIGSTOP (ended by the collective timeout), SIGSEGV or SIGTERM of a random rank, and a checkpoint
folder that fills up for a while (a small tmpfs in this process's private mount namespace, when
it has one). With --hosts the job runs under nano-run on two hosts of the multi-host test bed
(tests/multihost/testbed.sh), one rank each, and two more faults come up: the second host's link
cut until nano-run has declared it lost, and the second host lost (every process of it
killed). Each fault that ends an attempt waits for the next attempt's ranks before the next
fault, so faults land during start-up, rendezvous, restore, training and checkpoint writes
alike. Then it checks: the final weights are bit-identical to an uninterrupted run with the same
seed; the restarts equal the faults that ended an attempt; no process and no file of the job is
left on any host. Prints the schedule and a fault -> time-to-resume table; exits 1 with
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


def job_processes(marker, pids=None):
    """pid -> environ of every process (of `pids`, default all) whose command line holds `marker`
    (the job's folder)."""
    found = {}
    for pid in pids if pids is not None else [int(p) for p in os.listdir("/proc") if p.isdigit()]:
        if marker in cmdline_of(pid):
            env = environ_of(pid)
            if env is not None:
                found[pid] = env
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


class OneHost:
    """The job on this host: the example launches its 2 ranks itself (--num-processes)."""

    name = "this host"

    def command(self, program, ckpt, epochs, steps, max_restarts):
        restarts = ["--max-restarts", str(max_restarts)] if max_restarts else []
        return [program, "--num-processes", "2"] + example_args(ckpt, epochs, steps) + restarts

    def processes(self):
        return [int(p) for p in os.listdir("/proc") if p.isdigit()]

    def shm_entries(self):
        return os.listdir("/dev/shm")

    def close(self):
        pass


class TwoHosts:
    """The job on hostA and hostB of the multi-host test bed, one rank each, under nano-run
    (the mpi backend) on hostA; the faults of a host: its link cut, it lost."""

    name = "two test-bed hosts"

    def __init__(self, nano_run, root):
        self.nano_run = nano_run
        self.testbed = os.path.join(root, "tests", "multihost", "testbed.sh")
        agent = os.path.join(root, "tests", "multihost", "agent.sh")
        self.state = tempfile.mkdtemp(prefix="nano-soak-testbed-", dir="/run")
        # Its hosts' holders keep running: their output must not be a pipe this process waits on.
        with tempfile.TemporaryFile(mode="w+") as err:
            up = subprocess.run(["bash", self.testbed, "up", self.state, "2"], stdout=subprocess.DEVNULL, stderr=err)
            err.seek(0)
            said = err.read()
        if up.returncode == 77:  # not root, or no namespaces here
            print(said.strip())
            subprocess.run(["rm", "-rf", self.state])
            sys.exit(77)
        if up.returncode != 0:
            raise RuntimeError("the test bed did not come up: " + said[-500:])
        self.env = {"NANO_TESTBED": self.state, "OMPI_MCA_plm_rsh_agent": agent, "OMPI_MCA_plm_rsh_no_tree_spawn": "1",
                    "PRTE_MCA_plm_ssh_agent": agent, "PRTE_MCA_plm_ssh_no_tree_spawn": "1"}
        with open(os.path.join(self.state, "hostB.pid")) as f:
            self.holder_b = int(f.read())
        with open(os.path.join(self.state, "hostA.pid")) as f:
            self.holder_a = int(f.read())

    def command(self, program, ckpt, epochs, steps, max_restarts):
        # A host is lost after 8 s of silence (4 s left little margin for a host slowed by the
        # tests beside it); the restart waits 2 s, for a cut link to come back; a rank stopped by
        # the teardown gets 1 s to end.
        launch = [self.nano_run, "-n", "2", "--hosts", "hostA:1,hostB:1", "--heartbeat-timeout", "8",
                  "--restart-delay", "2", "--grace-period", "1", "--max-restarts", str(max_restarts)]
        return ["bash", self.testbed, "run", self.state, "hostA", "env"] + \
            [f"{k}={v}" for k, v in self.env.items()] + launch + [program] + example_args(ckpt, epochs, steps)

    def pids(self, host):
        out = subprocess.run(["bash", self.testbed, "pids", self.state, host], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    def processes(self):
        return self.pids("hostA") + self.pids("hostB")

    def shm_entries(self):
        entries = []
        for host in ("hostA", "hostB"):
            out = subprocess.run(["bash", self.testbed, "run", self.state, host, "ls", "-A", "/dev/shm"],
                                 capture_output=True, text=True).stdout
            entries += out.split()
        return entries

    def cut_link(self, down):
        subprocess.run(["bash", self.testbed, "link", self.state, "hostB", "down" if down else "up"], check=True)

    def lose_host_b(self):
        for pid in self.pids("hostB"):
            if pid != self.holder_b:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def close(self):
        subprocess.run(["bash", self.testbed, "down", self.state])
        subprocess.run(["rm", "-rf", self.state])


def example_args(ckpt, epochs, steps):
    return ["--epochs", str(epochs), "--max-steps-per-epoch", str(steps), "--batch-size", "32", "--test-limit", "500",
            "--equal-batches", "--checkpoint-every", "10", "--checkpoint-dir", ckpt, "--print-weights"]


def weights_of(text):
    m = re.findall(r"^(?:\[rank 0\] )?weights ([0-9a-f]{16})$", text, re.M)  # nano-run tags rank 0's lines
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
    ap.add_argument("--hosts", metavar="NANO_RUN", help="run on two test-bed hosts under this nano-run (root)")
    ap.add_argument("--kinds", help="only these kinds of fault, comma-separated (kill,stop,segv,term,disk,cut,lost)")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        host = TwoHosts(args.hosts, root) if args.hosts else OneHost()
    except RuntimeError as e:
        print(f"FAIL: {e}")
        return 1
    try:
        return soak(args, host)
    finally:
        host.close()


def soak(args, host):
    rng = random.Random(args.seed)
    failures = []
    work = tempfile.mkdtemp(prefix="nano-soak-")
    ckpt = os.path.join(work, "ckpt")
    os.makedirs(ckpt)
    # A small tmpfs for the checkpoints, so that a full disk can be made for a while; only in a
    # private mount namespace (soak.sh runs this under unshare -m), never in the machine's.
    # (The test bed's hosts see the folder through their own mount namespaces, not this one's.)
    disk = False
    if os.environ.get("NANO_SOAK_PRIVATE_MOUNTS") == "1" and not args.hosts:
        disk = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=32m,mode=0700", "nano-soak", ckpt]).returncode == 0
    kinds = list(ENDING) + (["disk"] if disk else []) + (["cut", "lost"] if args.hosts else [])
    if args.kinds:
        asked = args.kinds.split(",")
        unknown = [k for k in asked if k not in kinds]
        if unknown:
            print(f"FAIL: --kinds {args.kinds}: {','.join(unknown)} cannot come up here (here: {','.join(kinds)})")
            return 1
        kinds = asked
    if not disk and not args.hosts:
        print("soak: no private mount namespace here: no full-disk faults")
    target = args.faults if args.minutes <= 0 else 10**9
    # Room for the faults, and not much more (a soak is sized by the faults it must see): an attempt
    # trains at most 2.5 s before its fault, of which start-up and restore take about 1 s (about 50
    # steps on 2 cores), and loses at most the steps since its last checkpoint (10); a full disk
    # lets training go on for up to 4 s (about 130 steps). Two epochs of 50 steps a fault leave
    # twice the most the faults can use (6 faults: 600 steps for at most about 380).
    steps = min(938, args.steps or max(150, 50 * min(target, 200)))  # 60000 images / 2 ranks / 32
    # The uninterrupted run keeps nano's own bounds: on a loaded machine (CI runs other tests
    # beside this one) a rank can start more than 3 s after its peer. The faulted run ends a SIGSTOPped
    # rank by an 8 s collective timeout, set only when SIGSTOPs are among the faults: at 3 s, a rank
    # held up that long by the tests beside it on 2 cores timed out too, one restart more than faults.
    env = dict(os.environ, NANO_RENDEZVOUS_TIMEOUT="60")
    faulted_env = dict(env, NANO_COLLECTIVE_TIMEOUT="8") if "stop" in kinds else env

    # The uninterrupted run: the weights to reach.
    ref_dir = os.path.join(work, "ref")
    t0 = time.monotonic()
    ref = subprocess.run(host.command(args.program, ref_dir, args.epochs, steps, 0), env=env, capture_output=True,
                         text=True, timeout=3600)
    ref_seconds = time.monotonic() - t0
    reference = weights_of(ref.stdout)
    if ref.returncode != 0 or not reference:
        print(ref.stdout[-2000:], ref.stderr[-2000:])
        print("FAIL: the uninterrupted run failed")
        return 1
    print(f"soak: uninterrupted run on {host.name}: weights {reference} in {ref_seconds:.1f} s "
          f"({args.epochs * steps} steps, 2 ranks)")

    max_restarts = (target if args.minutes <= 0 else 100000) + 2
    job = subprocess.Popen(host.command(args.program, ckpt, args.epochs, steps, max_restarts), env=faulted_env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = Output(job.stdout)
    start = time.monotonic()
    deadline = start + args.minutes * 60 if args.minutes > 0 else None
    schedule = []  # (t, kind, rank, attempt, ended, resume_s)
    job_ids = set()
    attempt_jobs = {}  # attempt -> its NANO_JOB_ID
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
                attempt_jobs[attempt] = e["NANO_JOB_ID"]
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
        if kind == "cut":
            # hostB's link down until nano-run has declared the host lost (its heartbeat timeout),
            # then up again for the restart.
            rank = 1
            host.cut_link(True)
            wait_until = time.monotonic() + 30
            while job.poll() is None and time.monotonic() < wait_until and not out.first_after(r"host hostB lost", t):
                time.sleep(0.05)
            host.cut_link(False)
        elif kind == "lost":
            rank = 1
            host.lose_host_b()
        else:
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
    if deadline is None and len(schedule) < target:
        failures.append(f"only {len(schedule)} of {target} faults came before the training ended")
    if len({r[1] for r in schedule}) < min(4, len(kinds)) and deadline is None and target >= 6:
        failures.append(f"only {sorted({r[1] for r in schedule})} kinds of fault came up")
    time.sleep(0.5)
    left = [f"{pid} {cmdline_of(pid)[:80]}" for pid in job_processes(ckpt, host.processes())]
    if left:
        failures.append(f"processes left: {left}")
    # A lost host keeps what its killed processes had in its /dev/shm (a real one loses it with
    # its memory): said, not failed.
    lost_jobs = {attempt_jobs.get(r[3]) for r in schedule if r[1] == "lost"}
    shm = [n for n in host.shm_entries() if any(n.startswith("nano-" + j) for j in job_ids)]
    kept = [n for n in shm if any(j and n.startswith("nano-" + j) for j in lost_jobs)]
    if kept:
        print(f"soak: the lost host kept {len(kept)} entries of its lost attempts in its /dev/shm: {kept}")
    shm = [n for n in shm if n not in kept]
    if shm:
        failures.append(f"files left in /dev/shm: {shm}")
    sessions = [j for j in job_ids if os.path.exists("/tmp/nano-" + j)]
    if sessions:
        failures.append(f"Open MPI's session folders left in /tmp: {sessions}")
    if any(n.startswith(".nano-owner") for n in os.listdir(ckpt)):
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
