#!/usr/bin/python3
"""`nano-run --tune` and `-n auto` end to end: real nano-run, real ranks of a program on nano's
runtime whose speed per layout is scripted (scripted_trainer.cc), or of a shell program timed
by its own output (--tune-metric). Each case has its own cache folder (XDG_CACHE_HOME) and
TMPDIR, checks that nothing is left behind (trial folders, /dev/shm, a checkpoint folder), and
is bounded by timeouts. Prints "PASS: CASE" or "FAIL: CASE: why".

Usage: tune_test.py NANO_RUN SCRIPTED_TRAINER CASE [PYTHON | BIN_DIR]
  choice     the scripted winner is chosen and stored; -n auto --dry-run shows it; -n auto runs it
  tie        two layouts within noise: the one with fewer ranks wins
  failing    a layout whose rank fails is reported and skipped; the user's checkpoint folder is untouched
  metric     a program without nano's runtime: refused without --tune-metric, tuned with it;
             a per-rank figure read as the job's (1 rank wins) and per rank (2 ranks win)
  store      a corrupt cache is ignored with one warning and rewritten; another machine is a miss
  inputs     bad flags: one line, exit 2, nothing started
  interrupt  Ctrl-C during a trial: exit 130, nothing stored, nothing left
  torch_backend PYTHON   a stock PyTorch DDP program on the nano backend, timed by its all-reduces
  examples BIN_DIR       resnet18_cifar and fashion_mnist_nano tuned, then run with -n auto; and
                         fashion_mnist_nano --num-processes auto (TorchNanoOptions' kAuto) twice
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

NANO_RUN, TRAINER, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
EXTRA = sys.argv[4] if len(sys.argv) > 4 else ""
HERE = os.path.dirname(os.path.abspath(__file__))


class Failure(Exception):
    pass


def check(condition, why):
    if not condition:
        raise Failure(why)


STARTED = []  # pids of every nano-run (or in-program launcher) this test started


def shm_names():
    """The /dev/shm entries of the launches started here (nano-<launcher pid>-...): tests
    running beside this one have their own."""
    mine = [str(pid) for pid in STARTED]
    return set(n for n in os.listdir("/dev/shm") if n.startswith("nano-") and n.split("-")[1] in mine)


def run_program(argv, env, timeout):
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    STARTED.append(p.pid)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise
    return p.returncode, out, err


def run(args, env, timeout=240):
    return run_program([NANO_RUN] + args, env, timeout)


def store_of(env):
    with open(os.path.join(env["XDG_CACHE_HOME"], "nano", "tune.json")) as f:
        return json.load(f)


def trainer(script, steps="400"):
    return ["--backend", "subprocess", "--tune-candidates", "1,2", "--tune-steps", "6", "--", TRAINER, steps], script


def case_choice(env):
    # 1 rank: 16 samples per 60 ms; 2 ranks: 2 x 16 per 25 ms: 2 ranks, about 5x.
    env["SCRIPT"] = "1/*=60 2/*=25"
    args, _ = trainer(env["SCRIPT"])
    code, out, err = run(["--tune"] + args, env)
    check(code == 0, f"--tune exited {code}: {err[-1500:]}")
    check("* 2 ranks x 1 thread" in err, f"2 ranks not marked the winner:\n{err}")
    check("samples/s" in err, f"no samples/s in the table:\n{err}")
    entries = store_of(env)["entries"]
    check(len(entries) == 1 and entries[0]["layout"]["ranks"] == 2, f"stored: {entries}")
    check(entries[0]["ratio_to_one_rank"] > 2.5, f"ratio {entries[0]['ratio_to_one_rank']}")
    # --dry-run -n auto: the stored choice and its plan, nothing started.
    code, out, err = run(["-n", "auto", "--dry-run", "--backend", "subprocess", TRAINER, "400"], env)
    check(code == 0, f"-n auto --dry-run exited {code}: {err}")
    check("-n auto: 2 ranks x 1 thread" in err, err)
    check(out.count("rank") >= 2, out)
    # -n auto runs it: 2 ranks, each saying so.
    code, out, err = run(["-n", "auto", "--backend", "subprocess", TRAINER, "8"], env)
    check(code == 0, f"-n auto exited {code}: {err[-800:]}")
    check("nothing tuned" in err, f"a miss for other arguments must tune first: {err[-800:]}")
    code, out, err = run(["-n", "auto", "--backend", "subprocess", TRAINER, "400"], env)
    check(code == 0 and "scripted: 2 ranks" in out, f"-n auto exited {code}: {out[-400:]} {err[-400:]}")
    check("tune: trial" not in err, f"a hit must not tune: {err}")
    print(err.strip().splitlines()[0])


# 2 ranks 1 % faster than 1: within the smallest noise a rate is given (2 %), whatever the machine's
# load, since the figures are printed, not timed.
SH_TIE = ('r=100; [ "$WORLD_SIZE" = 2 ] && r=101; i=0; while [ $i -lt 400 ]; do echo "rate $r img/s"; '
          'i=$((i+1)); sleep 0.05; done')


def case_tie(env):
    code, out, err = run(["--tune", "--backend", "subprocess", "--tune-metric", r"rate ([0-9.]+) img/s",
                          "--tune-steps", "5", "/bin/sh", "-c", SH_TIE], env)
    check(code == 0, f"--tune exited {code}: {err[-1500:]}")
    check("* 1 rank x 2 threads" in err and "fewer ranks win" in err, f"1 rank must win a tie:\n{err}")
    check(store_of(env)["entries"][0]["layout"]["ranks"] == 1, "stored the wrong layout")
    print(err)


def case_failing(env, tmp):
    env["SCRIPT"] = "1/*=40 2/*=fail"
    checkpoint = os.path.join(tmp, "user-checkpoints")
    env["SCRIPT_CHECKPOINT"] = checkpoint
    args, _ = trainer(env["SCRIPT"])
    code, out, err = run(["--tune"] + args, env)
    check(code == 0, f"--tune exited {code}: {err[-1500:]}")
    # Which rank is named depends on which end nano-run reaps first: rank 1's exit, or rank 0's
    # abort when its peer's link closed in the same instant.
    check("2 ranks x 1 thread, automatic allocator: failed, skipped (rank " in err, f"no failure reported:\n{err}")
    check("* 1 rank x 2 threads" in err, err)
    check("automatic allocator  failed: rank " in err, f"the table does not say it failed:\n{err}")
    check(not os.path.exists(checkpoint), "a trial made the user's checkpoint folder")
    # An existing folder with a checkpoint in it stays exactly as it was.
    os.makedirs(checkpoint)
    with open(os.path.join(checkpoint, "keep.txt"), "w") as f:
        f.write("mine")
    code, out, err = run(["--tune"] + args, env)
    check(code == 0, f"second --tune exited {code}")
    check(sorted(os.listdir(checkpoint)) == ["keep.txt"], f"a trial wrote {os.listdir(checkpoint)}")


SH_METRIC = ('r=100; [ "$WORLD_SIZE" = 2 ] && r=150; i=0; while [ $i -lt 400 ]; do echo "rate $r img/s"; '
             'i=$((i+1)); sleep 0.05; done')


SH_RANK_METRIC = ('r=100; [ "$WORLD_SIZE" = 2 ] && r=90; i=0; while [ $i -lt 400 ]; do echo "rank rate $r"; '
                  'i=$((i+1)); sleep 0.05; done')


def case_metric(env):
    code, out, err = run(["--tune", "--backend", "subprocess", "/bin/sh", "-c", SH_METRIC], env)
    check(code == 2, f"without --tune-metric: exit {code}")
    check(len(err.strip().splitlines()) == 1 and "--tune-metric" in err, f"not one line naming --tune-metric: {err}")
    code, out, err = run(["--tune", "--backend", "subprocess", "--tune-metric", r"rate ([0-9.]+) img/s",
                          "--tune-steps", "5", "/bin/sh", "-c", SH_METRIC], env)
    check(code == 0, f"--tune-metric exited {code}: {err[-1500:]}")
    check("* 2 ranks x 1 thread" in err and "the whole job's figure, from rank 0" in err, err)
    print(err)
    # A program whose every rank prints its own speed: 100 alone, 90 each at 2 ranks. As the
    # job's figure that reads as 1 rank being faster; per rank, 2 ranks do 180.
    for flag, winner, says in (("--tune-metric", "1 rank x 2 threads", "the whole job's figure"),
                               ("--tune-metric-per-rank", "2 ranks x 1 thread", "each rank's own figure, summed")):
        code, out, err = run(["--tune", "--backend", "subprocess", flag, r"rank rate ([0-9.]+)",
                              "--tune-steps", "5", "/bin/sh", "-c", SH_RANK_METRIC], env)
        check(code == 0, f"{flag} exited {code}: {err[-1500:]}")
        check(f"* {winner}" in err and says in err, f"{flag}: not {winner} ({says}):\n{err}")
        print(err)


def case_store(env):
    path = os.path.join(env["XDG_CACHE_HOME"], "nano", "tune.json")
    os.makedirs(os.path.dirname(path))
    with open(path, "w") as f:
        f.write("{ not json")
    env["SCRIPT"] = "1/*=60 2/*=25"
    args, _ = trainer(env["SCRIPT"])
    code, out, err = run(["--tune"] + args, env)
    check(code == 0, f"--tune exited {code}: {err[-800:]}")
    check(err.count("ignoring the tuning cache") == 1, f"not one warning:\n{err}")
    check(store_of(env)["entries"][0]["layout"]["ranks"] == 2, "not rewritten")
    # Another machine (a synthetic one of 4 cores) is a miss: the dry run says it would tune.
    code, out, err = run(["-n", "auto", "--dry-run", "--synthetic", "core:4 pu:1", TRAINER, "400"], env)
    check(code == 0 and "nothing stored" in out and "4 ranks x 1 thread" in out, f"{code}: {out} {err}")
    # The same machine but other arguments: a miss too.
    code, out, err = run(["-n", "auto", "--dry-run", TRAINER, "401"], env)
    check(code == 0 and "nothing stored" in out, f"{code}: {out} {err}")


def case_inputs(env):
    rows = [
        (["--tune", "--tune-candidates", "0", TRAINER], "--tune-candidates"),
        (["--tune", "--tune-candidates", "1,64", TRAINER], "--tune-candidates 64 is more than"),
        (["--tune", "--tune-metric", "(", "/bin/true"], "--tune-metric '(' is not a regular expression"),
        (["--tune", "-n", "2", TRAINER], "--tune chooses --num-processes itself"),
        (["--tune", "--tune-steps", "5", "--tune-seconds", "2", TRAINER], "not both"),
        (["--tune-steps", "5", TRAINER], "need --tune or --num-processes auto"),
        (["--tune", "--tune-allocators", "mimalloc", TRAINER], "'mimalloc'"),
        (["-n", "auto", "--hosts", "a:1,b:1", TRAINER], "--num-processes auto tunes the ranks of one host"),
    ]
    for args, want in rows:
        code, out, err = run(args, env, timeout=60)
        check(code == 2, f"{args}: exit {code}: {err}")
        check(len(err.strip().splitlines()) == 1 and want in err, f"{args}: {err!r}")
    check(not os.path.exists(os.path.join(env["XDG_CACHE_HOME"], "nano")), "a bad input stored something")


def case_interrupt(env):
    env["SCRIPT"] = "1/*=50 2/*=50"
    args, _ = trainer(env["SCRIPT"], "100000")
    args = [a if a != "6" else "100000" for a in args]  # trials that would run for long
    p = subprocess.Popen([NANO_RUN, "--tune"] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    STARTED.append(p.pid)
    time.sleep(4)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    check(p.returncode == 130, f"exit {p.returncode}: {err[-800:]}")
    check("nothing stored" in err, err[-400:])
    check(not os.path.exists(os.path.join(env["XDG_CACHE_HOME"], "nano", "tune.json")), "stored after Ctrl-C")


def case_torch_backend(env, tmp):
    ddp_train = os.path.join(HERE, "..", "..", "python", "torch_backend", "ddp_train.py")
    out = os.path.join(tmp, "weights.pt")
    code, _, err = run(["--tune", "--backend", "subprocess", "--tune-steps", "4", EXTRA, ddp_train, "--backend", "nano",
                        "--steps", "30", "--out", out], env)
    check(code == 0, f"--tune exited {code}: {err[-1500:]}")
    check("rank-steps/s" in err and "the runtime's step times" in err, f"not timed by its steps:\n{err}")
    check(store_of(env)["entries"][0]["unit"] == "rank-steps/s", "stored the wrong unit")
    # A program on Gloo that names no nano backend: refused before anything starts.
    gloo = "import torch.distributed as dist; dist.init_process_group('gloo')"
    code, _, err = run(["--tune", "--backend", "subprocess", EXTRA, "-c", gloo], env)
    check(code == 2 and "--tune-metric" in err, f"gloo: exit {code}: {err}")
    # One that names it but trains on Gloo: each trial says it saw no step, and how to time it.
    code, _, err = run(["--tune", "--backend", "subprocess", "--tune-seconds", "1", EXTRA, ddp_train, "--backend",
                        "gloo", "--steps", "30", "--out", out], env)
    check(code == 1 and "reported no training step" in err and "every layout failed" in err, f"{code}: {err}")
    print(err)


def case_examples(env):
    bin_dir = EXTRA
    resnet = [os.path.join(bin_dir, "resnet18_cifar"), "--steps", "1000", "--batch-size", "16"]
    code, _, err = run(["--tune", "--backend", "subprocess", "--tune-seconds", "2"] + resnet, env, timeout=280)
    check(code == 0 and "samples/s" in err, f"resnet18_cifar --tune exited {code}: {err[-1500:]}")
    print(err)
    fashion = [os.path.join(bin_dir, "fashion_mnist_nano"), "--epochs", "1", "--max-steps-per-epoch", "60",
               "--test-limit", "100"]
    code, _, err = run(["--tune", "--backend", "subprocess", "--tune-seconds", "1"] + fashion, env)
    check(code == 0 and "samples/s" in err, f"fashion_mnist_nano --tune exited {code}: {err[-1500:]}")
    print(err)
    entries = store_of(env)["entries"]
    check(len(entries) == 2, f"{len(entries)} entries stored")
    ranks = entries[1]["layout"]["ranks"]
    code, out, err = run(["-n", "auto", "--backend", "subprocess"] + fashion, env)
    check(code == 0 and "tune: trial" not in err, f"-n auto exited {code}: {err[-800:]}")
    check(f"-n auto: {ranks} rank" in err and "test accuracy" in out, f"not the stored layout: {err[-400:]}")
    # In the program: TorchNanoOptions' kAuto tunes on the first run, uses the store on the next.
    inprog = [os.path.join(bin_dir, "fashion_mnist_nano"), "--num-processes", "auto", "--epochs", "1",
              "--max-steps-per-epoch", "40", "--test-limit", "100"]
    env = dict(env)
    code, out, err = run_program(inprog, env, 240)
    check(code == 0 and "tuning first" in err and "tune: trial" in err, f"kAuto, first run: exit {code}: {err[-1200:]}")
    check("the tuned layout's ranks finished" in out, out[-300:])
    code, out, err = run_program(inprog, env, 240)
    check(code == 0 and "tune: trial" not in err and "num_processes = kAuto: " in err,
          f"kAuto, second run: exit {code}: {err[-800:]}")


def main():
    tmp = tempfile.mkdtemp(prefix="nano-tune-test-")
    before = shm_names()
    env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache"), TMPDIR=os.path.join(tmp, "tmp"))
    os.makedirs(env["TMPDIR"])
    try:
        cases = {
            "choice": lambda: case_choice(env),
            "tie": lambda: case_tie(env),
            "failing": lambda: case_failing(env, tmp),
            "metric": lambda: case_metric(env),
            "store": lambda: case_store(env),
            "inputs": lambda: case_inputs(env),
            "interrupt": lambda: case_interrupt(env),
            "torch_backend": lambda: case_torch_backend(env, tmp),
            "examples": lambda: case_examples(env),
        }
        if CASE not in cases:
            raise Failure(f"unknown case {CASE}")
        cases[CASE]()
        # nano's trial folders (torch 2.6's own temporary folders in a trial are the program's)
        left = [n for n in os.listdir(env["TMPDIR"]) if n.startswith("nano-")]
        check(not left, f"left in TMPDIR: {left}")
        deadline = time.monotonic() + 5
        while shm_names() - before and time.monotonic() < deadline:
            time.sleep(0.1)
        check(not (shm_names() - before), f"left in /dev/shm: {sorted(shm_names() - before)}")
    except Failure as e:
        print(f"FAIL: {CASE}: {e}")
        return 1
    except subprocess.TimeoutExpired as e:
        print(f"FAIL: {CASE}: timed out: {e}")
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"PASS: {CASE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
