#!/usr/bin/python3
"""Process-level tests of the Python API (nano_torch.TorchNano and @nano, python/
nano_torch/torch_nano.py) on Debian's python3-torch. Every case runs real callers that launch real
ranks through nano's launcher, bounded by a timeout, and checks that nothing is left in /dev/shm
(the callers' jobs) or in the callers' TMPDIR. Prints "PASS: CASE" or "FAIL: CASE: why".

Usage: api_test.py BUILD_DIR CASE
  decorated      @nano at 1, 2 and 3 ranks (3 oversubscribed) against one process on N times the
                 batch (auto_lr off): the weights to float tolerance; the caller's model and
                 optimizer state equal rank 0's; the value comes back
  stdin          the same program read from standard input (`python3 -`), 2 ranks
  under_nano_run the same program started by `nano-run -n 2`: each rank's call joins that world
                 (no launch of its own) and returns its own value
  shared_tensors tensors of 1 MiB or more reach the ranks through shared memory with their exact
                 values (views at an offset, transposed, int64); a rank's writes stay its own; the
                 caller keeps its values; a large parameter travels by value
  subclass       a TorchNano subclass at 2 ranks: setup()'s shapes, the rank properties,
                 all_gather, broadcast; print() and a tqdm bar appear once (rank 0's); the
                 caller's model holds rank 0's weights; rank 0 is pinned to its share of the CPUs
  options        precision 64 with channels_last, gloo and "spawn"; bf16; cpu_for_each_process;
                 distributed_backend "mpi" (Open MPI through nano-run's rank shim)
  faults         a rank that raises (type, message and traceback in the caller's
                 RankFailedError), a rank SIGKILLed, a function that cannot be pickled
  interrupt      SIGINT to the caller while its ranks run: KeyboardInterrupt within the grace
                 period, no rank left
  bad_options    each bad option: one line naming it, ValueError or TypeError, nothing started
  resume         @nano with checkpoint_dir and max_restarts, a rank SIGKILLed at step 10: the ranks
                 start again, resume from step 8 and end with the weights of an uninterrupted run,
                 bit for bit (dropout, shuffling, momentum and auto_lr included); 2 checkpoints kept;
                 the caller's optimizer gets its own rate back (auto_lr's factor divided out). The
                 killed run's folder was planted with garbage, a forged header and links at higher
                 steps and at its first checkpoint's name: each named in one line, left as it was,
                 never followed nor counted (the first checkpoint written beside its link); then
                 a payload byte of its newest checkpoint is changed: found as both ranks load it, and a
                 third run falls back to the one before it
                 and still ends bit-identical; 3 ranks resume the 2 ranks' checkpoint and finish
                 the epoch's rest; a folder of the first format is refused in one line; through
                 the engine's binding, a write that fails (a file size limit) is said once with
                 its cause and leaves no temporary, and four threads share one folder object; a
                 folder open to others is refused unless checkpoint_shared_folder=True
  handoff        what the caller and its ranks hand each other (_handoff.py) without a launch: a seal
                 made with another key, for another purpose, or cut short is refused naming the
                 file; a job folder or file that is a link, another's or open to others is refused;
                 a file is written beside a planted link without following it, TorchNano.save's too
  planted        a launch whose ranks find a payload this launch did not seal: every rank refuses it
                 before unpickling (HandoffError naming the file), the marker its unpickling would
                 make stays absent; the launch's secrets are on no process's command line
                 (subprocess and mpi ranks, shims, mpirun, orted); ranks started from a working
                 folder holding a planted nano_torch import nano's own
  pip_venv       `pip install --no-build-isolation` of the source tree into a venv made with
                 --system-site-packages over python3-torch (this build reused, NANO_BUILD_DIR):
                 the venv's nano_torch, not the build's, runs the @nano example and an mpi launch
                 (through the nano-run the package carries)
  examples       examples/python's TorchNano and @nano programs (ResNet-18 on 1024 Fashion-MNIST
                 images): they train (test accuracy over 0.25; 0.40-0.68 measured, 0.1 is chance)
  notebook       the @nano notebook executed by a real Jupyter kernel (nbconvert --execute): its
                 loop, defined in a cell, trains in 2 ranks and the notebook's model is trained
"""
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

from harness import (BUILD, CALLERS, HERE, PYDIR, PYTHON, Failure, check, environment, last_json,  # noqa: F401
                     leftovers, main, run)


def decorated(tmp):
    for n in (1, 2, 3):
        code, out, err, seconds = run([os.path.join(HERE, "train_decorated.py"), str(n)], tmp)
        check(code == 0, f"{n} ranks: exit {code}: {err[-1500:]}")
        got = last_json(out, err)
        print(f"{n} ranks ({seconds:.1f} s): {got}")
        check(got["rank"] == 0, f"the value is rank {got['rank']}'s, not rank 0's")
        check(got["shard_batches"] == 12 // n, f"a rank's loader has {got['shard_batches']} batches, not {12 // n}")
        # The same sums in another order: float32 rounding, 3 epochs of 12 steps (measured: at most
        # 6e-8 at 2 and 3 ranks); 1e-5 is far above that and far below a wrong gradient's effect.
        check(got["vs_reference"] < 1e-5, f"weights differ from one process on {n}x the batch by "
              f"{got['vs_reference']}")
        check(got["caller_vs_rank0"] == 0 and got["momentum_vs_rank0"] == 0,
              "the caller's model or optimizer does not hold rank 0's state")


def stdin_program(tmp):
    with open(os.path.join(HERE, "train_decorated.py")) as f:
        program = f.read()
    code, out, err, seconds = run(["-", "2"], tmp, stdin=program)
    check(code == 0, f"exit {code}: {err[-1500:]}")
    got = last_json(out, err)
    print(f"from standard input ({seconds:.1f} s): {got}")
    check(got["vs_reference"] < 1e-5 and got["caller_vs_rank0"] == 0, str(got))


def under_nano_run(tmp):
    started = time.monotonic()
    p = subprocess.run([os.path.join(BUILD, "bin", "nano-run"), "-n", "2", PYTHON,
                        os.path.join(HERE, "train_decorated.py"), "2"], env=environment(tmp), capture_output=True,
                       text=True, timeout=180)
    check(p.returncode == 0, f"nano-run exited {p.returncode}: {p.stderr[-1500:]}")
    got = [json.loads(line.split("] ", 1)[1]) for line in p.stdout.splitlines() if "] {" in line]
    print(f"under nano-run ({time.monotonic() - started:.1f} s): {got}")
    check(sorted(g["rank"] for g in got) == [0, 1], f"each rank should return its own value: {p.stdout[-800:]!r}")
    check(all(g["vs_reference"] < 1e-5 and g["shard_batches"] == 6 for g in got), str(got))


def shared_tensors(tmp):
    code, out, err, seconds = run([os.path.join(HERE, "shared_tensors.py")], tmp)
    check(code == 0, f"exit {code}: {err[-1500:]}")
    got = last_json(out, err)
    print(f"shared tensors ({seconds:.1f} s): {got}")
    check(all(got.values()), f"not as shipped: {got}")


def subclass(tmp):
    code, out, err, seconds = run([os.path.join(HERE, "train_subclass.py"), "2"], tmp)
    check(code == 0, f"exit {code}: {err[-1500:]}")
    got = last_json(out, err)
    print(f"2 ranks ({seconds:.1f} s): {got}")
    check(got["world"] == 2 and got["rank"] == 0 and got["zero"] and got["local_rank"] == 0, str(got))
    check(got["gathered"] == [0, 1] and got["broadcast"] == 0, f"all_gather/broadcast: {got}")
    check(got["setup_shapes"] == [2, "list"], f"setup(model, [optimizer]) gave {got['setup_shapes']}")
    check(got["caller_vs_rank0"] == 0 and got["trained"] > 0, f"the caller's model: {got}")
    check(got["backend"] == "nano", got["backend"])
    cpus = len(os.sched_getaffinity(0))
    check(got["affinity"] and (cpus == 1 or len(got["affinity"]) <= cpus // 2),
          f"rank 0 runs on CPUs {got['affinity']}: not pinned to its share of the {cpus}")
    check(out.count("PRINTED by rank") == 1, f"print() appeared {out.count('PRINTED by rank')} times")
    bars = len(re.findall(r"BAR: 100%", out + err))
    # Two epochs, one bar each; tqdm redraws its last state once more when a bar closes.
    check(2 <= bars <= 4, f"{bars} finished tqdm bars (rank 0's two epochs expected, no other rank's): "
          f"{(out + err)[-800:]!r}")


def options(tmp):
    for args, want in [(["64", "1", "gloo", "spawn"], {"param_dtype": "torch.float64", "channels_last": True,
                                                       "backend": "gloo", "out_dtypes": ["torch.float64"]}),
                       (["bf16", "0"], {"param_dtype": "torch.float32", "out_dtypes": ["torch.float32"]}),
                       (["32", "0", "nano", "mpi"], {"backend": "nano", "world": 2})]:
        code, out, err, seconds = run([os.path.join(HERE, "train_subclass.py"), "2"] + args, tmp, timeout=180)
        check(code == 0, f"{args}: exit {code}: {err[-1500:]}")
        got = last_json(out, err)
        print(f"{args} ({seconds:.1f} s): " + ", ".join(f"{k}={got[k]}" for k in want))
        for key, value in want.items():
            check(got[key] == value, f"{args}: {key} is {got[key]}, expected {value}")
        check(got["caller_vs_rank0"] < 1e-7, f"{args}: the caller's model differs from rank 0's")
    code, out, err, _ = run(["-c", PINNED], tmp)
    check(code == 0, f"cpu_for_each_process: exit {code}: {err[-1200:]}")
    check(out.split() == ["[1]"], f"cpu_for_each_process=[[1], [0]]: rank 0 ran on {out!r}, not [1]")
    print("cpu_for_each_process=[[1], [0]]: rank 0 on CPU 1")


PINNED = """
import os, torch
from nano_torch import nano
@nano(num_processes=2, cpu_for_each_process=[[1], [0]])
def where(model):
    return sorted(os.sched_getaffinity(0))
print(where(torch.nn.Linear(1, 1)))
"""


def faults(tmp):
    code, out, err, seconds = run([os.path.join(HERE, "failing.py"), "raise"], tmp)
    got = last_json(out, err)
    print(f"raise ({seconds:.1f} s): {got['text'].splitlines()[0]}")
    check("CAUGHT RankFailedError" in out and got["is_runtime_error"], out[-400:])
    check(got["rank"] == 1 and got["type"] == "ValueError" and got["message"] == "boom at rank 1", str(got))
    check("in deep_failure" in got["traceback"] and "nano_torch" not in got["traceback"],
          f"the traceback should be the rank's own code's: {got['traceback']!r}")
    code, out, err, seconds = run([os.path.join(HERE, "failing.py"), "kill"], tmp)
    got = last_json(out, err)
    print(f"kill ({seconds:.1f} s): {got['text']}")
    check(got["rank"] == 1 and got["signal"] == signal.SIGKILL and "killed by SIGKILL" in got["text"], str(got))
    code, out, err, seconds = run([os.path.join(HERE, "failing.py"), "unpicklable"], tmp)
    got = last_json(out, err)
    print(f"unpicklable ({seconds:.1f} s): {got['text']}")
    check("CAUGHT TypeError" in out and "locked_training" in got["text"] and "lock" in got["text"], str(got))


def interrupt(tmp):
    p = subprocess.Popen([PYTHON, os.path.join(HERE, "failing.py"), "sleep"], env=environment(tmp),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    CALLERS.append(p.pid)
    try:
        line = ""
        deadline = time.monotonic() + 60
        while "SLEEPING" not in line and time.monotonic() < deadline:
            line = p.stdout.readline()
            check(line or p.poll() is None, "the caller ended before its ranks slept")
        os.kill(p.pid, signal.SIGINT)
        sent = time.monotonic()
        out, err = p.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    print(f"SIGINT: caller ended {took:.1f} s later with {p.returncode}")
    check("KeyboardInterrupt" in err, f"no KeyboardInterrupt: {err[-800:]}")
    check(took < 5 + 3, f"{took:.1f} s is over the grace period (5 s) plus 3 s")
    left = subprocess.run(["pgrep", "-f", tmp], capture_output=True, text=True).stdout.split()
    check(not left, f"ranks left running: {left}")


BAD = [
    ("num_processes=0", "ValueError", "num_processes"),
    ("num_processes='2'", "TypeError", "num_processes"),
    ("distributed_backend='ray'", "ValueError", "distributed_backend='ray'"),
    ("distributed_backend='fork'", "ValueError", "distributed_backend"),
    ("process_group_backend='nccl'", "ValueError", "process_group_backend"),
    ("process_group_backend='ccl'", "ValueError", "process_group_backend='ccl'"),
    ("accelerator='gpu'", "ValueError", "accelerator='gpu'"),
    ("gpus=2", "ValueError", "gpus=2"),
    ("precision='fp8'", "ValueError", "precision"),
    ("cpu_for_each_process=[[0]]", "ValueError", "cpu_for_each_process"),
    ("max_restarts=-1", "ValueError", "max_restarts"),
    ("hosts='a:1'", "ValueError", "hosts"),
    ("grace_period_ms='soon'", "TypeError", "grace_period_ms"),
    ("timeout=0", "ValueError", "timeout"),
    ("no_such_option=1", "TypeError", "no_such_option"),
    ("devices=3", "ValueError", "devices=3"),
    ("num_nodes=2", "ValueError", "num_nodes=2"),
    ("plugins=['x']", "ValueError", "plugins"),
    ("tpu_cores=8", "ValueError", "tpu_cores=8"),
    ("distributed_backend='deepspeed'", "ValueError", "distributed_backend 'deepspeed'"),
    ("accelerator=1", "TypeError", "accelerator"),
    ("find_unused_parameters=1", "TypeError", "find_unused_parameters"),
    ("use_ipex='yes'", "TypeError", "use_ipex"),
]


def bad_options(tmp):
    program = "import nano_torch, sys\n"
    for i, (option, _, _) in enumerate(BAD):
        kind = "TorchNano" if i % 2 else "nano"
        given = option if option.startswith("num_processes") else f"num_processes=2, {option}"
        program += (f"try:\n    nano_torch.{kind}({given})\n    print('ACCEPTED', {option!r})\n"
                    f"except (ValueError, TypeError) as e:\n    print(type(e).__name__, '|', e)\n")
    code, out, err, _ = run(["-c", program], tmp, timeout=60)
    check(code == 0, f"exit {code}: {err[-1000:]}")
    lines = out.splitlines()
    check(len(lines) == len(BAD), f"{len(lines)} answers to {len(BAD)} bad options: {out!r}")
    for (option, kind, named), line in zip(BAD, lines):
        print(f"{option}: {line}")
        check(line.startswith(kind + " | ") and named in line, f"{option}: expected a {kind} naming {named!r}")
    # Every launch setting the extension lists (core/setting_list.h) is a keyword that reaches its
    # TorchNanoOptions field: a value of another type is a TypeError naming it.
    program = ("import nano_torch\nfrom nano_torch import _C\nfor field in _C.launch_setting_fields:\n"
               "    try:\n        nano_torch.TorchNano(num_processes=2, **{field: object()})\n"
               "        print('ACCEPTED', field)\n    except TypeError as e:\n        print(field, '|', e)\n")
    code, out, err, _ = run(["-c", program], tmp, timeout=60)
    check(code == 0, f"exit {code}: {err[-1000:]}")
    lines = out.splitlines()
    check(len(lines) >= 9, f"expected the 9 launch settings at least: {out!r}")
    for line in lines:
        field, _, message = line.partition(" | ")
        print(f"{field}=object(): {message}")
        check(message.startswith(f"nano: {field} must be "), f"{field}: {line!r}")
    check(not os.listdir(tmp), f"bad options left {os.listdir(tmp)} in TMPDIR")


def ckpt(step):
    return f"ckpt-{step:012d}.nano"


def plant(folder, target):
    """What someone who can write the checkpoint folder plants before the run: garbage and a forged
    header at higher steps, two links at higher steps and one at the name of the run's first
    checkpoint (step 4), all towards `target`, a file of theirs. The folder exists, with its key (an
    empty folder would get its key from the run, but not beside a file that looks sealed)."""
    sys.path.insert(0, PYDIR)
    from nano_torch import _C  # noqa: E402 - the build's package
    _C.CheckpointFolder(folder, True, False)
    with open(os.path.join(folder, ".nano-key")) as f:  # its id is in every header: no secret
        key_id = hashlib.sha256(b"nano-checkpoint-key\0" + bytes.fromhex(f.read())).hexdigest()[:16]
    with open(os.path.join(folder, ckpt(90000)), "wb") as f:
        f.write(os.urandom(3000))
    with open(os.path.join(folder, ckpt(90001)), "w") as f:  # and the one chunk's tag after its payload
        f.write(f"nano-checkpoint 3\nstep 90001\nworld 2\napi python\ntorch 2.6.0\nbytes 4\nkey {key_id}\nnonce 0011223344556677\n"
                "hmac-sha256 " + "a" * 64 + "\n\nevil" + "t" * 16)
    for step in (999999, 999998, 4):
        os.symlink(target, os.path.join(folder, ckpt(step)))
    return [ckpt(90000), ckpt(90001), ckpt(999998), ckpt(999999)]


def resume(tmp):
    weights = {}
    folder = os.path.join(tmp, "checkpoints-killed")
    target = os.path.join(tmp, "theirs")
    with open(target, "w") as f:
        f.write("theirs")
    planted = []
    for mode in ("whole", "killed", "fallback"):
        if mode == "whole":
            code, out, err, seconds = run([os.path.join(HERE, "train_resume.py"), mode,
                                           os.path.join(tmp, "checkpoints-whole")], tmp, timeout=180)
        else:
            if mode == "killed":
                planted = plant(folder, target)
            else:  # a payload byte of the newest checkpoint changed: found as every rank loads it, and
                # the run falls back to the one before it
                with open(os.path.join(folder, ckpt(16)), "r+b") as f:
                    at = f.read(4096).index(b"\n\n") + 2 + 100
                    f.seek(at)
                    byte = f.read(1)[0]
                    f.seek(at)
                    f.write(bytes([byte ^ 1]))
            code, out, err, seconds = run([os.path.join(HERE, "train_resume.py"),
                                           "killed" if mode == "killed" else "whole", folder], tmp, timeout=180)
        check(code == 0, f"{mode}: exit {code}: {err[-1500:]}")
        got = last_json(out, err)
        print(f"{mode} ({seconds:.1f} s): attempt {got['attempt']}, {got['steps_this_attempt']} steps in it, "
              f"checkpoints {got['checkpoints']}")
        weights[mode] = got["weights"]
        check(abs(got["caller_lr"] - 0.05) < 1e-12, f"{mode}: the caller's rate is {got['caller_lr']}, not 0.05")
        ours = sorted(set(got["checkpoints"]) - set(planted) - {ckpt(4)})
        if mode == "whole":
            check(ours == [ckpt(12), ckpt(16)], f"{mode}: the folder holds {got['checkpoints']}")
            shutil.rmtree(os.path.join(tmp, "checkpoints-whole"))
        elif mode == "killed":
            # Every planted entry as it was (the links still links), the run's newest two beside them.
            check(ours == [ckpt(12), ckpt(16)] and set(planted) | {ckpt(4)} <= set(got["checkpoints"]),
                  f"{mode}: the folder holds {got['checkpoints']}")
            check(all(os.path.islink(os.path.join(folder, n)) for n in (ckpt(4), ckpt(999998), ckpt(999999))),
                  "a planted link was replaced")
            check(open(target).read() == "theirs", "a checkpoint was written through a planted link")
            check(got["attempt"] == "1" and got["steps_this_attempt"] == 10, f"the second attempt: {got}")
            check(f"resumed from {folder}/ckpt-000000000008" in out, f"no resumption from step 8: {out[-600:]!r}")
            named = (f"nano: 5 entries of checkpoint folder {folder} never loaded, counted as kept or deleted: "
                     f"{ckpt(999999)} (a symbolic link), {ckpt(999998)} (a symbolic link), {ckpt(90001)} (its seal does "
                     f"not verify (damaged or forged)), {ckpt(90000)} (not a nano checkpoint), "
                     f"{ckpt(4)} (a symbolic link)")
            check(named in err, f"no line naming the planted entries: {err[-1500:]!r}")
            check(f"nano: {folder}/{ckpt(4)} was there already (a symbolic link): this checkpoint is written beside "
                  "it, as ckpt-000000000004." in err, f"no line on the checkpoint written beside the link: {err[-1500:]!r}")
        else:
            check(f"resumed from {folder}/{ckpt(12)} (step 12)" in out, f"no fallback to step 12: {out[-800:]!r}")
            check(f"{ckpt(16)} (chunk 1 of 1 does not verify (damaged or forged))" in err,
                  f"no line naming the damaged step 16: {err[-1500:]!r}")
            # The damaged one stays; this run's step 16 is written beside it.
            beside = [n for n in got["checkpoints"] if n.startswith("ckpt-000000000016.") and n != ckpt(16)]
            check(ckpt(16) in got["checkpoints"] and len(beside) == 1 and ckpt(12) in got["checkpoints"],
                  f"{mode}: the folder holds {got['checkpoints']}")
    # Another world size: the 2 ranks' checkpoint of step 16 resumes on 3, which deal the rest of
    # the epoch anew (32 samples: 11 each, 2 batches of 8 a rank) and finish.
    code, out, err, seconds = run([os.path.join(HERE, "train_resume.py"), "three", folder], tmp, timeout=120)
    check(code == 0, f"three ranks: exit {code}: {(out + err)[-1500:]}")
    got = last_json(out, err)
    check(re.search(r"resumed from \S+/ckpt-000000000016\.[0-9a-f]{8}\.nano \(step 16, written by 2 ranks, this "
                    r"run has 3\)", out) and got["steps_this_attempt"] == 2, f"three ranks: {got} {out[-600:]!r}")
    print(f"three ranks ({seconds:.1f} s): resumed the 2 ranks' step 16, {got['steps_this_attempt']} steps left")
    # A folder of nano_torch's first format (step-S folders) is refused in one line, never trained
    # over from step 0.
    old = os.path.join(tmp, "old-format")
    os.makedirs(os.path.join(old, "step-8"), mode=0o700)
    os.chmod(old, 0o700)
    code, out, err, seconds = run([os.path.join(HERE, "train_resume.py"), "whole", old], tmp, timeout=120)
    check(code != 0 and f"nano: checkpoint folder {old} holds checkpoints of an earlier format (step-8) "
          "and none of this one: this nano does not read them" in err, f"old format: exit {code}: {err[-1500:]}")
    check(sorted(os.listdir(old)) == [".nano-key", "step-8"] or sorted(n for n in os.listdir(old)
          if not n.startswith(".nano-owner")) == [".nano-key", "step-8"], f"old format: {os.listdir(old)}")
    shutil.rmtree(folder)
    shutil.rmtree(old)
    os.unlink(target)
    # A folder others may write is refused in the caller, in one line, before anything starts;
    # checkpoint_shared_folder says it is shared on purpose.
    shared = os.path.join(tmp, "shared")
    program = ("import os, sys, torch\nfrom torch.utils.data import DataLoader, TensorDataset\n"
               "from nano_torch import nano\nd = sys.argv[1]\nos.makedirs(d)\nos.chmod(d, 0o777)\n"
               "def train(model, optimizer, loader):\n    return sum(1 for _ in loader)\n"
               "model = torch.nn.Linear(2, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
               "loader = DataLoader(TensorDataset(torch.zeros(4, 2)), batch_size=2)\n"
               "for shared in (False, True):\n    try:\n"
               "        print('ran', nano(num_processes=1, checkpoint_dir=d, checkpoint_shared_folder=shared)(train)"
               "(model, opt, loader))\n"
               "    except ValueError as e:\n        print('ValueError |', e)\n")
    code, out, err, seconds = run(["-c", program, shared], tmp, timeout=120)
    check(code == 0 and out.splitlines()[:2] == [
        f"ValueError | nano: checkpoint folder {shared} is writable by others (mode 0777): whoever can write it can "
        "plant or remove checkpoints; use a folder of your own (or make it yours alone: chmod go-w), or set "
        "checkpoint_shared_folder if it is shared on purpose", "ran 2"],
        f"a folder open to others: exit {code}: {out[-800:]} {err[-800:]}")
    shutil.rmtree(shared)
    # The engine through the binding: a write that fails (a file size limit, as a full disk) is said
    # once, with its cause, by finish(), and leaves no temporary (torch 1.13's writer ended the
    # process when the failure was raised again from its destructor); threads sharing one folder
    # object take turns.
    engine = os.path.join(tmp, "engine")
    program = ("import os, resource, signal, sys, threading, torch\nfrom nano_torch import _C\n"
               f"f = _C.CheckpointFolder({engine!r}, True, False)\n"
               "w = f.start(1, 1, torch.__version__)\nw.write(b'x' * 100)\nw.finish()\n"
               "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
               "resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.RLIM_INFINITY))\n"
               "w = f.start(2, 1, torch.__version__)\n"
               "try:\n    torch.save({'t': torch.zeros(1 << 20)}, w)\n    w.finish()\n"
               "except RuntimeError as e:\n    print('caught', e)\nfinally:\n    w.abort()\n"
               "resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n"
               "ts = [threading.Thread(target=lambda: [f.choose() for _ in range(200)]) for _ in range(4)]\n"
               "[t.start() for t in ts]\n[t.join() for t in ts]\n"
               "print('left', sorted(os.listdir(sys.argv[1])))\n")
    code, out, err, seconds = run(["-c", program, engine], tmp, timeout=120)
    check(code == 0 and f"caught nano: cannot write checkpoint {engine}/{ckpt(2)}: File too large" in out
          and f"left ['.nano-key', '{ckpt(1)}']" in out, f"the engine's failed write: exit {code}: {out[-600:]} "
          f"{err[-800:]}")
    shutil.rmtree(engine)
    for mode in ("killed", "fallback"):
        differ = sum(a != b for a, b in zip(weights["whole"], weights[mode]))
        check(differ == 0, f"{mode}: {differ} of {len(weights['whole'])} weights differ from the uninterrupted run's")
    print(f"all {len(weights['whole'])} weights bit-identical to the uninterrupted run's, after a kill among planted "
          "links and forgeries, and after a damaged checkpoint")


ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def handoff(tmp):
    sys.path.insert(0, PYDIR)
    from nano_torch import _handoff  # noqa: E402 - the build's package
    key, other = os.urandom(32), os.urandom(32)
    sealed = _handoff.seal(key, "payload", b"data")
    check(_handoff.unseal(key, "payload", sealed, "f") == b"data", "a seal did not verify")
    for what, k, purpose, blob in (("another key", other, "payload", sealed), ("another purpose", key, "result", sealed),
                                   ("cut short", key, "payload", sealed[:-1]), ("no seal", key, "payload", b"data")):
        try:
            _handoff.unseal(k, purpose, blob, "/x/payload.pkl")
            raise Failure(f"{what}: accepted")
        except _handoff.HandoffError as e:
            check(str(e) == "nano_torch: /x/payload.pkl was not made by this launch (its seal does not verify): "
                  "nothing of it is used", f"{what}: {e}")
    folder = os.path.join(tmp, "job")
    os.mkdir(folder, 0o700)
    _handoff.check_private_folder(folder)
    os.chmod(folder, 0o755)
    for what, path in (("open to others", folder), ("a link", os.path.join(tmp, "link"))):
        if what == "a link":
            os.chmod(folder, 0o700)
            os.symlink(folder, path)
        try:
            _handoff.check_private_folder(path)
            raise Failure(f"a job folder {what}: accepted")
        except _handoff.HandoffError as e:
            check(f"job folder {path} is not this user's private folder" in str(e), f"{what}: {e}")
    # A link planted where a file goes: replaced, never followed; read_file refuses to follow one.
    target = os.path.join(tmp, "target")
    with open(target, "w") as f:
        f.write("theirs")
    os.symlink(target, os.path.join(folder, "result.pkl"))
    try:
        _handoff.read_file(os.path.join(folder, "result.pkl"))
        raise Failure("read_file followed a link")
    except _handoff.HandoffError as e:
        check("cannot read" in str(e), f"read_file on a link: {e}")
    _handoff.write_file(os.path.join(folder, "result.pkl"), b"ours")
    check(open(target).read() == "theirs", "write_file wrote through a planted link")
    check(_handoff.read_file(os.path.join(folder, "result.pkl")) == b"ours", "write_file's file")
    check(os.stat(os.path.join(folder, "result.pkl")).st_mode & 0o777 == 0o600, "a handed-over file is not 0600")
    # TorchNano.save, at a name where someone put a link: the link is replaced, never written through.
    import torch
    from nano_torch import TorchNano

    class Lite(TorchNano):
        def train(self):
            pass

    lite = Lite(num_processes=1)
    saved = os.path.join(folder, "model.pt")
    os.symlink(target, saved)
    lite.save({"w": torch.ones(2)}, saved)
    check(open(target).read() == "theirs" and not os.path.islink(saved), "TorchNano.save wrote through a link")
    check(os.stat(saved).st_mode & 0o777 == 0o600 and torch.equal(lite.load(saved)["w"], torch.ones(2)),
          "TorchNano.save's file")
    shutil.rmtree(folder)
    os.unlink(os.path.join(tmp, "link"))
    os.unlink(target)


def planted(tmp):
    marker = os.path.join(tmp, "planted-ran")
    code, out, err, seconds = run([os.path.join(HERE, "planted.py"), marker], tmp, timeout=120)
    check(code == 0, f"exit {code}: {err[-1500:]}")
    print(out.strip())
    check(re.search(r"^refused HandoffError: nano_torch: /\S+/payload\.pkl was not made by this launch \(its seal "
                    r"does not verify\): nothing of it is used$", out, re.M), f"not refused: {out[-600:]!r}")
    check("marker False" in out and not os.path.exists(marker), "the planted payload ran")
    # The secrets are in no process's command line, for either way of starting ranks: the Python
    # launch's key stood in every mpi rank shim's.
    for backend in ("subprocess", "mpi"):
        code, out, err, _ = run([os.path.join(HERE, "secrets_seen.py"), backend], tmp, timeout=120)
        check(code == 0, f"{backend}: exit {code}: {err[-1500:]}")
        got = last_json(out, err)
        print(f"{backend}: the ranks hold {got['secrets']}; command lines holding one: {got['shown']}")
        check("NANO_PYTHON_KEY" in got["secrets"], f"{backend}: the rank has no key: {got}")
        check(not got["shown"], f"{backend}: a secret is on a command line: {got['shown']}")
    # A working folder another user could write, with a nano_torch of theirs in it: the caller's
    # script lies elsewhere, so neither it nor its ranks import from there (`python -m` put the
    # working folder first on the ranks' path).
    scratch = os.path.join(tmp, "scratch")
    os.makedirs(os.path.join(scratch, "nano_torch"))
    planted_marker = os.path.join(tmp, "planted-module-ran")
    with open(os.path.join(scratch, "nano_torch", "__init__.py"), "w") as f:
        f.write(f"open({planted_marker!r}, 'w').close()\nraise SystemExit('the planted nano_torch ran')\n")
    code, out, err, _ = run([os.path.join(HERE, "from_working_folder.py")], tmp, timeout=120, cwd=scratch)
    check(code == 0 and "world 2" in out, f"from a planted working folder: exit {code}: {(out + err)[-1500:]}")
    check(not os.path.exists(planted_marker), "a rank imported nano_torch from the working folder")
    print("from a working folder holding a planted nano_torch: the ranks ran nano's own")
    shutil.rmtree(scratch)


def pip_venv(tmp):
    venv = os.path.join(tmp, "venv")
    env = dict(environment(tmp), NANO_BUILD_DIR=BUILD, PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH")
    started = time.monotonic()
    for step in ([PYTHON, "-m", "venv", "--system-site-packages", venv],
                 [os.path.join(venv, "bin", "pip"), "install", "--no-build-isolation", "-q", ROOT]):
        p = subprocess.run(step, env=env, capture_output=True, text=True, timeout=600, cwd=tmp)
        check(p.returncode == 0, f"{step[:3]} exited {p.returncode}: {p.stdout[-800:]} {p.stderr[-1500:]}")
    print(f"venv and pip install: {time.monotonic() - started:.1f} s")
    python = os.path.join(venv, "bin", "python")
    where = subprocess.run([python, "-c", "import nano_torch; print(nano_torch.__file__)"], env=env,
                           capture_output=True, text=True, timeout=60, cwd=tmp)
    check(where.stdout.startswith(venv), f"the venv imports nano_torch from {where.stdout!r} {where.stderr[-500:]}")
    p = subprocess.run([python, os.path.join(EXAMPLES, "nano_decorator.py")],
                       env=dict(env, NANO_EXAMPLE_SAMPLES="1024"), capture_output=True, text=True, timeout=240, cwd=tmp)
    check(p.returncode == 0, f"the example in the venv exited {p.returncode}: {p.stderr[-1500:]}")
    accuracy = accuracy_in(p.stdout, "test accuracy of the caller's model")
    print(f"nano_decorator.py from the venv: test accuracy {accuracy}")
    check(accuracy > TRAINED, f"accuracy {accuracy}: it did not train")
    p = subprocess.run([python, "-c", MPI_FROM_VENV], env=env, capture_output=True, text=True, timeout=120, cwd=tmp)
    check(p.returncode == 0 and p.stdout.split() == ["2", venv + "/bin/python"],
          f"an mpi launch from the venv: exit {p.returncode}, {p.stdout[-300:]!r} {p.stderr[-1500:]}")
    print("distributed_backend='mpi' from the venv: 2 ranks on the venv's python")
    shutil.rmtree(venv)


MPI_FROM_VENV = """
import sys, torch, torch.distributed as dist
from nano_torch import nano
@nano(num_processes=2, distributed_backend="mpi")
def world(model):
    return dist.get_world_size(), sys.executable
print(*world(torch.nn.Linear(1, 1)))
"""


EXAMPLES = os.path.join(HERE, "..", "..", "..", "examples", "python")
# Random initialisation, 16 steps of Adam: test accuracy 0.40-0.68 in 12 runs; chance is 0.1.
TRAINED = 0.25


def accuracy_in(text, label):
    found = re.findall(label + r": ([0-9.]+)", text)
    check(found, f"no {label!r} line in {text[-800:]!r}")
    return float(found[-1])


def examples(tmp):
    for name, label in (("torch_nano.py", "rank 0's test accuracy"),
                        ("nano_decorator.py", "test accuracy of the caller's model")):
        os.environ["NANO_EXAMPLE_SAMPLES"] = "1024"
        code, out, err, seconds = run([os.path.join(EXAMPLES, name)], tmp, timeout=240)
        check(code == 0, f"{name}: exit {code}: {err[-1500:]}")
        accuracy = accuracy_in(out, label)
        print(f"{name} ({seconds:.1f} s): {label} {accuracy}")
        check(accuracy > TRAINED, f"{name}: accuracy {accuracy} is not over {TRAINED}: it did not train")
        check(out.count("Train Epoch: 0") == 1, f"{name}: the epoch line appeared {out.count('Train Epoch: 0')} times")


def notebook(tmp):
    os.environ["NANO_EXAMPLE_SAMPLES"] = "1024"
    out_dir = os.path.join(tmp, "executed")
    started = time.monotonic()
    p = subprocess.run(["jupyter-nbconvert", "--to", "notebook", "--execute", "--output-dir", out_dir,
                        "--ExecutePreprocessor.timeout=200", os.path.join(EXAMPLES, "nano_decorator.ipynb")],
                       env=environment(tmp), capture_output=True, text=True, timeout=280)
    check(p.returncode == 0, f"nbconvert exited {p.returncode}: {p.stderr[-1500:]}")
    with open(os.path.join(out_dir, "nano_decorator.ipynb")) as f:
        cells = json.load(f)["cells"]
    shutil.rmtree(out_dir)
    text = "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))
    accuracy = accuracy_in(text, "test accuracy of the notebook's model")
    print(f"notebook ({time.monotonic() - started:.1f} s): the notebook's model's test accuracy {accuracy}")
    check("Train Epoch: 0" in text, f"the ranks' epoch line is not in the notebook's output: {text[-600:]!r}")
    check(accuracy > TRAINED, f"accuracy {accuracy} is not over {TRAINED}: the notebook's model was not trained")


if __name__ == "__main__":
    sys.exit(main({"decorated": decorated, "stdin": stdin_program, "under_nano_run": under_nano_run,
                   "shared_tensors": shared_tensors, "subclass": subclass, "options": options, "faults": faults,
                   "interrupt": interrupt, "bad_options": bad_options, "resume": resume, "handoff": handoff,
                   "planted": planted, "pip_venv": pip_venv, "examples": examples, "notebook": notebook}))
