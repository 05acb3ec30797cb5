#!/usr/bin/python3
"""BigDL-Nano's own material against nano_torch, as BigDL-Nano's users have it: its tests and its
training tutorials with only the imports changed. Prints "PASS: CASE" or "FAIL: CASE: why".

Usage: bigdl_test.py BUILD_DIR CASE
  port       BigDL-Nano's TorchNano, @nano and channels-last tests (test_torch_nano.py,
             test_torch_nano_decorator.py, test_channels_last.py, ported unchanged but for the
             imports) under pytest: every one of the 21 that apply on a CPU passes (one needs 4
             CPUs and is skipped, naming that, where there are fewer); the others are skipped for
             exactly the reasons conftest.py gives; nothing is left in /dev/shm or TMPDIR
  tutorials  BigDL-Nano's training tutorials (use_ipex=True, precision='bf16' with and without
             use_ipex, num_processes=2 with seed_everything, @nano(num_processes=2)) and its
             channels-last how-to notebook (TorchNano and @nano, executed by a real Jupyter kernel),
             run as BigDL's own test scripts ran them (5 training images) on a machine without
             IPEX: each trains its 5 epochs, use_ipex=True says once that IPEX is missing and what
             runs instead. They read /tmp/data and download ResNet-18's weights: the case runs in
             a private mount namespace whose /tmp is its own tmpfs, with stand-ins for both
             (tutorials/standin_data.py); nothing of another user's /tmp is read or written.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.abspath(sys.argv[1])
CASE = sys.argv[2]
PYDIR = os.path.join(BUILD, "lib", "nano", "python")
PYTHON = sys.executable  # the Python nano_torch was built for
APPLY_ON_A_CPU = 21  # BigDL-Nano's TorchNano/@nano/channels-last tests without Trainer, IPEX, oneCCL, CUDA patching


class Failure(Exception):
    pass


def check(condition, why):
    if not condition:
        raise Failure(why)


def environment(tmp, **extra):
    return dict(os.environ, PYTHONPATH=PYDIR, TMPDIR=tmp, OMPI_ALLOW_RUN_AS_ROOT="1",
                OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", **extra)


def run(argv, env, timeout, cwd=None):
    """A caller to its end, in a session of its own (killed whole at the bound); (code, output)."""
    p = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, 9)
        out, _ = p.communicate()
        raise Failure(f"{argv} did not end within {timeout} s: {out[-1500:]}")
    return p.returncode, out


def _owner(name):
    """The pid in a /dev/shm name of nano's jobs (nano-PID-...) or torch's shared tensors (torch_PID_...)."""
    match = re.match(r"(?:nano-|torch_)(\d+)[-_]", name)
    return int(match.group(1)) if match else None


def _alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def leftovers(tmp, before):
    """What the callers left once they ended: /dev/shm entries of nano's jobs and torch's shared
    tensors that were not there `before` and whose process is gone (another test's live job is not
    ours), and anything in the callers' TMPDIR. torch's shared-memory manager ends by itself once
    its last client has: it gets 10 s."""
    deadline = time.monotonic() + 10
    while True:
        left = sorted(n for n in set(os.listdir("/dev/shm")) - before
                      if _owner(n) is not None and not _alive(_owner(n))) + sorted(os.listdir(tmp))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)


def port(tmp):
    sys.path.insert(0, HERE)
    import conftest
    report = os.path.join(tmp, "report.xml")  # removed before what the callers left is looked for
    files = ["test_torch_nano.py", "test_torch_nano_decorator.py", "test_channels_last.py"]
    code, out = run([PYTHON, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", f"--junitxml={report}"] + files,
                    environment(tmp), timeout=900, cwd=HERE)
    try:
        cases = ElementTree.parse(report).getroot().iter("testcase")
    finally:
        if os.path.exists(report):
            os.unlink(report)
    passed, skipped, failed = [], {}, []
    for case in cases:
        module, cls = case.get("classname").split(".")[-2:]  # tests.python.bigdl.test_x.TestLite
        name = f"{module}.py::{cls}::{case.get('name')}"
        if case.find("skipped") is not None:
            skipped[name] = case.find("skipped").get("message", "")
        elif case.find("failure") is not None or case.find("error") is not None:
            failed.append(name)
        else:
            passed.append(name)
    print(out[-3000:])
    check(code == 0 and not failed, f"pytest exited {code}; failed: {failed}")
    needs_cpus = {name: why for name, why in skipped.items() if name in conftest.NEEDS_CPUS}
    for name, why in skipped.items():
        expected = conftest.STAY_OUT.get(name)
        check(expected is not None or name in needs_cpus, f"{name} was skipped but is not named in conftest.py: {why}")
        check(expected is None or why == expected, f"{name} was skipped for {why!r}, not {expected!r}")
    check(set(conftest.STAY_OUT) <= set(skipped), f"not skipped: {sorted(set(conftest.STAY_OUT) - set(skipped))}")
    check(len(passed) + len(needs_cpus) == APPLY_ON_A_CPU,
          f"{len(passed)} passed and {len(needs_cpus)} need more CPUs, not {APPLY_ON_A_CPU} in all: {passed}")
    print(f"port: {len(passed)} of BigDL-Nano's {APPLY_ON_A_CPU} tests that apply on a CPU passed"
          + "".join(f"; {name} skipped: {why}" for name, why in needs_cpus.items()))


TUTORIALS = ["pytorch_train_ipex.py", "pytorch_train_bf16.py", "pytorch_train_multi_instance.py",
             "pytorch_train_ipex_decorator.py"]
NOTEBOOK = "pytorch_training_channels_last.ipynb"
IPEX_LINE = "nano_torch: use_ipex=True: intel_extension_for_pytorch is not installed"


def as_bigdl_ran(text, notebook):
    """A tutorial with the changes BigDL's own test scripts made before running it: 5 training
    images (run_nano_pytorch_test.sh's and the how-to guides' script's seds), install lines off."""
    if notebook:
        text = text.replace("DataLoader(train_dataset",
                            "DataLoader(torch.utils.data.Subset(train_dataset, torch.randperm(len(train_dataset))[:5])")
        return text.replace("!pip install", "#!pip install").replace("!source bigdl-nano-init",
                                                                     "#!source bigdl-nano-init")
    return text.replace(":-val_size", ":5").replace("-val_size:", "-5:")


def tutorials(tmp):
    work = tempfile.mkdtemp(prefix="bigdl-tutorials-")
    sys.path.insert(0, os.path.join(HERE, "tutorials"))
    import standin_data
    standin_data.make_oxford_pet("/tmp/data")
    torch_home = os.path.join(work, "torch-home")
    standin_data.make_resnet18_weights(torch_home)
    env = environment(tmp, TORCH_HOME=torch_home)
    for name in TUTORIALS + [NOTEBOOK]:
        with open(os.path.join(HERE, "tutorials", name)) as f:
            text = as_bigdl_ran(f.read(), name == NOTEBOOK)
        path = os.path.join(work, name)
        with open(path, "w") as f:
            f.write(text)
        started = time.monotonic()
        if name == NOTEBOOK:
            code, out = run(["jupyter-nbconvert", "--to", "notebook", "--execute", "--output-dir", work,
                             "--output", "executed", "--ExecutePreprocessor.timeout=300", path], env, timeout=400)
            check(code == 0, f"{name}: nbconvert exited {code}: {out[-1500:]}")
            with open(os.path.join(work, "executed.ipynb")) as f:
                cells = json.load(f)["cells"]
            out = "".join("".join(o.get("text", "")) for c in cells for o in c.get("outputs", []))
            runs = 2  # MyNano(channels_last=True).train() and @nano(channels_last=True)
        else:
            code, out = run([PYTHON, path], env, timeout=300, cwd=work)
            check(code == 0, f"{name} exited {code}: {out[-1500:]}")
            runs = 2 if name == "pytorch_train_bf16.py" else 1
        epochs = re.findall(r"Train Epoch: (\d+)", out)
        check(epochs.count("4") == runs, f"{name}: {runs} trainings of 5 epochs expected, saw epochs {epochs}")
        ipex = out.count(IPEX_LINE)
        check(ipex == ("use_ipex=True" in text), f"{name}: the use_ipex line {ipex} times: {out[-1500:]}")
        print(f"tutorials: {name} trained {runs} x 5 epochs ({time.monotonic() - started:.1f} s)"
              + (": " + next(line for line in out.splitlines() if IPEX_LINE in line) if ipex else ""))


def in_private_tmp():
    """The tutorials case runs again in a mount namespace of its own whose /tmp is a new tmpfs: their
    fixed /tmp/data is this test's, and nothing of another user's /tmp is read or written. The
    repository and the build folder, where they lie under /tmp (a CI clone), are bound into the new
    /tmp at their own paths. The namespace goes with the case's last process."""
    if os.environ.get("NANO_BIGDL_PRIVATE_TMP") == "1":
        keep = []
        for path in sorted({os.path.realpath(os.path.join(HERE, "..", "..", "..")), os.path.realpath(BUILD)}):
            if path.startswith("/tmp/") and not any(path.startswith(k + "/") for k in keep):
                keep.append(path)
        # Each held open before the new /tmp hides it: its descriptor still reaches it.
        held = {path: os.open(path, os.O_PATH | os.O_DIRECTORY) for path in keep}
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2g,mode=1777", "tmpfs", "/tmp"], check=True)
        for path, fd in held.items():
            os.makedirs(path, mode=0o700)
            # --no-canonicalize: the descriptor as it is, not the path it names (the new /tmp's)
            subprocess.run(["mount", "--no-canonicalize", "--bind", f"/proc/{os.getpid()}/fd/{fd}", path], check=True)
            os.close(fd)
        return None
    code, out = run(["unshare", "--mount", "--propagation", "private", PYTHON, os.path.abspath(__file__), BUILD, CASE],
                    dict(os.environ, NANO_BIGDL_PRIVATE_TMP="1"), timeout=900)
    print(out, end="")
    return 0 if code == 0 and f"PASS: {CASE}" in out else 1


def main():
    if CASE == "tutorials":
        code = in_private_tmp()
        if code is not None:
            return code
    tmp = tempfile.mkdtemp(prefix="nano-bigdl-")
    before = set(os.listdir("/dev/shm"))
    try:
        {"port": port, "tutorials": tutorials}[CASE](tmp)
        left = leftovers(tmp, before)
        check(not left, f"left in /dev/shm or the callers' TMPDIR: {left}")
        print(f"PASS: {CASE}")
        return 0
    except Failure as e:
        print(f"FAIL: {CASE}: {e}")
        return 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
