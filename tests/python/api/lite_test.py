#!/usr/bin/python3
"""Process-level tests of what BigDL-Nano's users wrote beyond the seed's two programs: TorchNano's and
@nano's whole surface, auto_lr as BigDL-Nano did it, use_ipex, precision and Lightning's keywords
(docs/python-api.md's table names the test of each). Real callers launch real ranks through nano's
launcher (harness.py). Prints "PASS: CASE" or "FAIL: CASE: why".

Usage: lite_test.py BUILD_DIR CASE
  tables           the pure decisions without a launch: the warm-up's ratio table, Lightning's
                   keywords, precision and distributed_backend (what is accepted, noted, refused)
  surface          lite_surface.py at 1 and 2 ranks: BigDL-Nano's attributes, the rank properties
                   in and out of train(), device, node_rank, to_device, run, setup(move_to_device=),
                   setup_dataloaders(replace_sampler=, move_to_device=), backward(model=),
                   all_gather of tensors, numbers and collections (a world of one hands back its
                   input; sync_grads carries the gradient), seed_everything() without a seed, the
                   set-up optimizer's attributes (before and after steps) and class, what is set on it,
                   loaded into it or added to it reaching the user's optimizer, the set-up optimizer
                   pickled, deep-copied and saved as the user's, a model with an unused parameter at 2
                   ranks (find_unused_parameters), LightningLite's keywords (strategy ignored with one
                   line), @nano with them
  auto_lr          auto_lr_schedule.py at 2 ranks against BigDL-Nano's schedule computed from its
                   formula: the rate inside each step, the user's rate in param_groups and
                   state_dict() after it, LambdaLR/OneCycleLR/CyclicLR/StepLR/ReduceLROnPlateau/
                   SequentialLR made before or after setup() composing with the warm-up, max_step set
                   by the user, a fresh warm-up on a second setup()
  use_ipex         use_ipex=True with bf16 at 2 ranks, TorchNano with two optimizers and @nano: without
                   IPEX it trains and says so once; with a stand-in IPEX (fake_ipex/) ipex.optimize is
                   called in every rank after the DDP wrapping, in place, with bfloat16, once per
                   optimizer, the model in training mode
  inert_decorator  a module with @nano at its top, imported again by every rank: 2 ranks of one core
                   each under @nano(num_processes=2) (the ranks check nothing against their core and
                   start nothing), and 4 ranks sharing 2 cores (oversubscribed)
  precision        bf16: the user's forward gets bfloat16 inputs under CPU autocast (its layers compute
                   in bfloat16), the model hands back float32 and a loss against float32 targets
                   trains; precision=16 trains as bf16 and says so in one line
"""
import json
import math
import os
import sys

import harness
from harness import HERE, check, last_json, run

PYDIR = harness.PYDIR


def tables(tmp):
    sys.path.insert(0, PYDIR)
    from nano_torch import _optimizer, _options
    # BigDL-Nano's _TorchNanoOptimizer: step k runs at (R - 1) * min(k, max_step) / max_step + 1
    for step, ratio, max_step, want in [(0, 2, 1000, 1.0), (1, 2, 1000, 1.001), (500, 4, 1000, 2.5),
                                        (1000, 4, 1000, 4.0), (5000, 4, 1000, 4.0), (3, 1, 10, 1.0),
                                        (2, 3, 4, 2.0)]:
        got = _optimizer.warmup_ratio(step, ratio, max_step)
        check(math.isclose(got, want, rel_tol=1e-12), f"warmup_ratio({step}, {ratio}, {max_step}) = {got}, not {want}")
    accepted = [({}, 2, []), ({"accelerator": "cpu", "devices": 2, "num_nodes": 1}, 2, []),
                ({"accelerator": "auto", "devices": "auto", "gpus": 0, "plugins": []}, 4, []),
                ({"devices": "2"}, 2, []), ({"strategy": "deepspeed"}, 2, ["strategy='deepspeed' is ignored"])]
    for given, n, notes in accepted:
        told = []
        _options.lite_keywords(n, given, told)
        check(len(told) == len(notes) and all(t.startswith(w) for t, w in zip(told, notes)),
              f"{given}: noted {told}, expected {notes}")
    refused = [({"accelerator": "gpu"}, ValueError, "accelerator='gpu'"), ({"accelerator": "cuda"}, ValueError, "cuda"),
               ({"gpus": 1}, ValueError, "gpus=1"), ({"gpus": [0]}, ValueError, "gpus=[0]"),
               ({"devices": 4}, ValueError, "devices=4 differs from num_processes=2"),
               ({"devices": [0, 1]}, ValueError, "devices=[0, 1]"), ({"devices": True}, ValueError, "devices=True"),
               ({"num_nodes": 2}, ValueError, "hosts="), ({"plugins": "ddp"}, ValueError, "plugins='ddp'"),
               ({"tpu_cores": 8}, ValueError, "tpu_cores=8"), ({"accelerator": 2}, TypeError, "accelerator")]
    for given, kind, named in refused:
        try:
            _options.lite_keywords(2, given, [])
            raise harness.Failure(f"{given} was accepted")
        except kind as e:
            check(named in str(e), f"{given}: {e!r} does not name {named!r}")
    for value, want, noted in [(32, "32", False), ("32", "32", False), (64, "64", False), ("bf16", "bf16", False),
                               (16, "bf16", True), ("16", "bf16", True), ("16-mixed", "bf16", True),
                               ("bf16-mixed", "bf16", False), ("32-true", "32", False)]:
        told = []
        got = _options.precision_of(value, told)
        check(got == want and bool(told) == noted, f"precision {value!r}: {got}, noted {told}")
    for value, want in [("subprocess", ("subprocess", None)), ("spawn", ("subprocess", None)), ("mpi", ("mpi", None)),
                        ("ddp", ("subprocess", None)), ("ddp_spawn", ("subprocess", None)),
                        ("ddp_find_unused_parameters_false", ("subprocess", False))]:
        got = _options.distributed_backend_of(value, [])
        check(got == want, f"distributed_backend {value!r}: {got}, not {want}")
    for value, kind in [("ray", ValueError), ("k8s", ValueError), ("dp", ValueError), ("horovod", ValueError),
                        (None, TypeError)]:
        try:
            _options.distributed_backend_of(value, [])
            raise harness.Failure(f"distributed_backend {value!r} was accepted")
        except kind as e:
            check(repr(value) in str(e) or "str" in str(e), f"{value!r}: {e} does not name it")
    print("tables: warm-up ratios, 5 keyword sets accepted, 11 refused, 9 precisions, 11 distributed_backends")


def surface(tmp):
    for n in (1, 2):
        code, out, err, seconds = run([os.path.join(HERE, "lite_surface.py"), str(n)], tmp)
        check(code == 0, f"{n} ranks: exit {code}: {err[-1500:]}")
        got = last_json(out, err)
        print(f"{n} ranks ({seconds:.1f} s): {json.dumps(got)}")
        check(got["inside"] == [0, 0, 0, n, True], f"rank 0's properties in train(): {got['inside']}")
        check(got["outside"] == [0, 0, 0, 1, True], f"the caller's properties outside train(): {got['outside']}")
        check(got["attributes"] == {"num_processes": n, "use_ipex": False, "cpu_for_each_process": None,
                                    "channels_last": False, "auto_lr": True}, f"attributes {got['attributes']}")
        check(got["num_processes"] == n and got["dtype"] == "None" and got["device"] == "cpu", "in train()")
        check(got["batches"] == [4 // n, 4], f"sharded and replace_sampler=False loaders: {got['batches']} batches")
        opt = got["optimizer"]
        check(opt["isinstance_sgd"] and opt["is_user_optimizer"] == "SGD" and opt["max_step"] == 1000
              and opt["cur_step"] == 0 and opt["cur_lr_ratio"] == 1.0 and opt["max_lr_ratio"] == n
              and opt["auto_lr"] is True, f"the set-up optimizer's attributes: {opt}")
        steps = 4 // n if n > 1 else 0  # BigDL-Nano's warm-up stands still where there is nothing to scale (N = 1)
        check(got["after_steps"] == [steps, (n - 1) * steps / 1000 + 1, 0.1],
              f"after {4 // n} steps the warm-up's step, factor and the user's rate: {got['after_steps']}")
        check(got["copies"] == ["SGD"] * 3, f"pickled, deep-copied, saved: {got['copies']}")
        check(got["through"] == [3, 0.25, 2, True], f"set on, loaded into, added to the wrapper: {got['through']}")
        check(got["gather_tensor"] == ([2] if n == 1 else [n, 2]), f"all_gather(tensor): {got['gather_tensor']}")
        check(got["gather_number"] == (3 if n == 1 else [3] * n), f"all_gather(3): {got['gather_number']}")
        check(got["gather_dict"] == ([[2], [1]] if n == 1 else [[n, 2], [n, 1]]), f"dict: {got['gather_dict']}")
        check(got["gather_grad"] == [float(n)] * 2, f"sync_grads: the gradient {got['gather_grad']}, not {n}")
        check(got["to_device"] == ["cpu", "cpu", "Linear"] and got["run"] is None, "to_device, run")
        check(isinstance(got["seed"], int) and got["seed_given"] == 5, "seed_everything")
        check(got["decorated"] == ["NanoSGD", n, "torch.float32"], f"@nano: {got['decorated']}")
        ignored = [line for line in err.splitlines() if "is ignored, as BigDL-Nano ignored it" in line]
        check(len(ignored) == 2, f"one line each for strategy='ddp' and 'ddp_spawn', got {ignored}")


def bigdl_schedule(name, when, max_step, steps, ratio):
    """BigDL-Nano's rates, from its formula: the user's scheduler on a plain optimizer gives the
    user's rate of each step; BigDL's _TorchNanoOptimizer multiplied it by cur_lr_ratio, which
    starts at 1 and after each step becomes (ratio - 1) * cur_step / max_step + 1 until max_step."""
    import torch
    sys.path[:0] = [HERE, PYDIR]
    import auto_lr_schedule as program  # its schedulers, as the ranks made them
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    scheduler = program.schedulers(name, optimizer)
    user, inside = [], []
    cur_step, cur_ratio = 0, 1.0
    for _ in range(steps):
        user.append(optimizer.param_groups[0]["lr"])
        inside.append(user[-1] * cur_ratio)
        optimizer.step()
        if cur_step < (max_step or 1000):
            cur_step += 1
            cur_ratio = (ratio - 1.0) * cur_step / (max_step or 1000) + 1
        program.step_scheduler(scheduler)
    return user, inside


def auto_lr(tmp):
    code, out, err, seconds = run([os.path.join(HERE, "auto_lr_schedule.py"), "2"], tmp)
    check(code == 0, f"exit {code}: {err[-1500:]}")
    got = last_json(out, err)
    for key, record in got.items():
        name, when, max_step = key.split("-")
        max_step = None if max_step == "None" else int(max_step)
        steps = len(record["inside"])
        user, inside = bigdl_schedule(name, when, max_step, steps, 2)
        close = all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(record["inside"], inside))
        check(steps == 12 and close, f"{key}: the rates inside step() {record['inside']}, BigDL's {inside}")
        check(all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(record["outside"], user))
              and record["saved"] == record["outside"], f"{key}: param_groups/state_dict hold {record['outside']}, "
              f"{record['saved']}, not the user's rates {user}")
        check(record["again"] == [1.0, 1], f"{key}: a second setup()'s first step ran at {record['again'][0]} times "
              f"the rate (a fresh warm-up: 1), its warm-up at step {record['again'][1]}")
        check(record["isinstance"], f"{key}: the set-up optimizer is not an SGD")
        print(f"{key}: inside step() {[round(r, 4) for r in record['inside'][:6]]}..., state_dict "
              f"{[round(r, 4) for r in record['saved'][:6]]}...: BigDL-Nano's")
    print(f"auto_lr ({seconds:.1f} s): {len(got)} schedules of 12 steps at 2 ranks equal BigDL-Nano's")


IPEX_LINE = "nano_torch: use_ipex=True: intel_extension_for_pytorch is not installed"


def use_ipex(tmp):
    code, out, err, seconds = run([os.path.join(HERE, "use_ipex.py"), "2"], tmp)
    check(code == 0, f"without IPEX: exit {code}: {err[-1500:]}")
    got = last_json(out, err)
    check(got == {"dtype": "torch.bfloat16", "out": "torch.float32", "decorated": "torch.float32"}, f"{got}")
    said = [line for line in err.splitlines() if line.startswith(IPEX_LINE)]
    check(len(said) == 1 and "torch.autocast for bf16" in said[0], f"the line about IPEX: {said}")
    print(f"without IPEX ({seconds:.1f} s): trained, {said[0]}")
    log = os.path.join(tmp, "ipex.log")
    code, out, err, seconds = run([os.path.join(HERE, "use_ipex.py"), "2"], tmp,
                                  env={"PYTHONPATH": PYDIR + os.pathsep + os.path.join(HERE, "fake_ipex"),
                                       "FAKE_IPEX_LOG": log})
    check(code == 0, f"with IPEX: exit {code}: {err[-1500:]}")
    check(IPEX_LINE not in err, "with IPEX installed the line about its absence was printed")
    with open(log) as f:
        calls = [json.loads(line) for line in f]
    os.unlink(log)
    want = sorted(f"{rank} DistributedDataParallel {opt} torch.bfloat16 True True"
                  for rank in ("0", "1") for opt in ("SGD", "Adam", "SGD"))
    seen = sorted(f"{c['rank']} {c['model']} {c['optimizer']} {c['dtype']} {c['inplace']} {c['training']}"
                  for c in calls)
    check(seen == want, f"ipex.optimize calls {seen}, expected {want}")
    print(f"with a stand-in IPEX ({seconds:.1f} s): ipex.optimize in each rank after DDP, in place, bfloat16, "
          f"once per optimizer ({len(calls)} calls)")


def inert_decorator(tmp):
    module = os.path.join(HERE, "decorated_module.py")
    for ranks, oversubscribe in ((2, "0"), (4, "1")):
        code, out, err, seconds = run([module], tmp, env={"DECORATED_RANKS": str(ranks),
                                                          "DECORATED_OVERSUBSCRIBE": oversubscribe})
        check(code == 0, f"{ranks} ranks: exit {code}: {err[-1500:]}")
        got = last_json(out, err)
        print(f"{ranks} ranks ({seconds:.1f} s): {got}")
        check(got == {"world": ranks, "cpus": 1, "imported": True, "trained": True}, f"{ranks} ranks: {got}")


PRECISION = """
import json, torch
from torch.utils.data import DataLoader, TensorDataset
from nano_torch import nano
class Seen(torch.nn.Module):  # what the user's forward is given, and under which autocast
    def __init__(self):
        super().__init__()
        self.fc, self.seen = torch.nn.Linear(4, 1), set()
    def forward(self, x):
        inner = self.fc(x)
        self.seen.add(f"in {x.dtype}, autocast {torch.is_autocast_cpu_enabled()}, inner {inner.dtype}")
        return inner
@nano(num_processes=2, precision=PRECISION)
def train(model, optimizer, loader):
    dtypes = set()
    for x, y in loader:
        optimizer.zero_grad()
        out = model(x)
        dtypes.add(str(out.dtype))
        torch.nn.functional.mse_loss(out, y).backward()
        optimizer.step()
    return sorted(dtypes), sorted(model.seen)
net = Seen()
before = net.fc.weight.detach().clone()
out, seen = train(net, torch.optim.SGD(net.parameters(), lr=0.1),
                  DataLoader(TensorDataset(torch.randn(16, 4), torch.randn(16, 1)), batch_size=4))
print(json.dumps({"out": out, "seen": seen, "trained": not torch.equal(before, net.fc.weight.detach())}))
"""


def precision(tmp):
    for value in ("'bf16'", "16"):
        code, out, err, seconds = run(["-c", PRECISION.replace("PRECISION", value)], tmp)
        check(code == 0, f"precision={value}: exit {code}: {err[-1500:]}")
        got = last_json(out, err)
        said = [line for line in err.splitlines() if "precision=16 is float16 autocast" in line]
        print(f"precision={value} ({seconds:.1f} s): {got}" + (f"; {said[0]}" if said else ""))
        check(got == {"out": ["torch.float32"], "trained": True,
                      "seen": ["in torch.bfloat16, autocast True, inner torch.bfloat16"]}, f"precision={value}: {got}")
        check(len(said) == (value == "16"), f"precision={value}: the line about 16: {said}")


if __name__ == "__main__":
    sys.exit(harness.main({"tables": tables, "surface": surface, "auto_lr": auto_lr, "use_ipex": use_ipex,
                           "inert_decorator": inert_decorator, "precision": precision}))
