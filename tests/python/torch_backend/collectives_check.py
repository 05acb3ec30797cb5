"""One rank of the collectives check: every collective x dtype x op on the `nano` backend,
compared with Gloo's own result on a Gloo group of the same ranks (where Gloo has the operation),
else with the value computed in float64 from every rank's input gathered through Gloo.
Prints "collectives: N checks passed (G against Gloo's own result, R against the float64
reference)" and exits 0, or prints each mismatch and exits 1.
Environment: EXPECT_SHM=1|0, whether the group must use shared memory; EXPECT_HIERARCHICAL=1|0,
whether its all-reduces must be hierarchical (across hosts).
"""
import datetime
import faulthandler
import os
import sys

import torch
import torch.distributed as dist

import nano_torch

# A rank still here after this long is stuck: every thread's Python stack goes to stderr (which
# the test prints) and the rank exits, well before the test's own bound.
faulthandler.dump_traceback_later(150, exit=True)
dist.init_process_group("nano", timeout=datetime.timedelta(seconds=60))
RANK, N = dist.get_rank(), dist.get_world_size()
GLOO = dist.new_group(backend="gloo")
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int32, torch.int64]
OPS = [dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX]
if hasattr(dist.ReduceOp, "AVG"):
    OPS.append(dist.ReduceOp.AVG)
OP_NAMES = {op: name for op, name in zip(OPS, ["SUM", "PRODUCT", "MIN", "MAX", "AVG"])}
SIZES = [1, 1000, 300_000]
checks = {"gloo": 0, "reference": 0}
failures = []
# Every tensor handed to the comparison Gloo group stays referenced from Python until that group
# is destroyed: a Gloo worker thread drops its work's tensors a little after completing it, and
# must never drop the last reference to a tensor Python let go of (that needs the interpreter
# lock, which the thread destroying the group may hold).
GLOO_TENSORS = []


def values(dtype, numel, rank, salt=0):
    """Rank-dependent values every dtype holds exactly (quarters in [-1.25, 1.25]; small
    positive integers), so sums and products of a few ranks are exact where rounding allows."""
    idx = torch.arange(numel, dtype=torch.int64)
    if dtype.is_floating_point:
        return (((idx * 13 + rank * 7 + salt) % 11 - 5).to(torch.float64) / 4).to(dtype)
    return ((idx * 13 + rank * 7 + salt) % 3 + 1).to(dtype)


def close(got, want, dtype, average=False):
    if dtype in (torch.bfloat16, torch.float16):
        return torch.allclose(got.double(), want.double(), rtol=1e-2, atol=1e-2)
    if average and dtype.is_floating_point:
        # nano's AVG multiplies the sum by 1/N, within an ulp of the division.
        return torch.allclose(got, want, rtol=4 * torch.finfo(dtype).eps, atol=0)
    return torch.equal(got, want)


def expect(name, got, want, dtype, against):
    checks[against] += 1
    if not close(got, want, dtype, average=" AVG " in name):
        bad = (got.double() - want.double()).abs().argmax().item() if got.numel() else 0
        failures.append(f"{name}: rank {RANK} got {got.flatten()[bad].item()} want {want.flatten()[bad].item()} "
                        f"at {bad} (against {against})")


def reference_all_reduce(dtype, numel, op, salt):
    inputs = [values(dtype, numel, q, salt).double() for q in range(N)]  # as each rank's input is
    acc = inputs[0].clone()
    for x in inputs[1:]:
        if op == dist.ReduceOp.SUM or op == getattr(dist.ReduceOp, "AVG", None):
            acc += x
        elif op == dist.ReduceOp.PRODUCT:
            acc *= x
        elif op == dist.ReduceOp.MIN:
            acc = torch.minimum(acc, x)
        else:
            acc = torch.maximum(acc, x)
    if op == getattr(dist.ReduceOp, "AVG", None):
        acc = acc / N if dtype.is_floating_point else torch.div(acc, N, rounding_mode="trunc")
    return acc.to(dtype)


def gloo_or_reference(dtype, numel, op, salt):
    x = values(dtype, numel, RANK, salt)
    GLOO_TENSORS.append(x)
    try:
        dist.all_reduce(x, op, group=GLOO)
        return x, "gloo"
    except RuntimeError:  # Gloo has no AVG, and Debian's no bfloat16 reduction
        return reference_all_reduce(dtype, numel, op, salt), "reference"


# all_reduce: every dtype x op x size, contiguous and not.
for dtype in DTYPES:
    for op in OPS:
        for numel in SIZES:
            x = values(dtype, numel, RANK, 1)
            dist.all_reduce(x, op)
            want, against = gloo_or_reference(dtype, numel, op, 1)
            expect(f"all_reduce {dtype} {OP_NAMES[op]} {numel}", x, want, dtype, against)
    t = values(dtype, 60 * 50, RANK, 2).reshape(60, 50).t()  # not contiguous
    dist.all_reduce(t)
    want, against = gloo_or_reference(dtype, 60 * 50, dist.ReduceOp.SUM, 2)
    expect(f"all_reduce {dtype} non-contiguous", t, want.reshape(60, 50).t(), dtype, against)

# Asynchronous: the call returns a Work whose future holds the tensors.
x = values(torch.float32, 100_000, RANK, 3)
work = dist.all_reduce(x, async_op=True)
fut = work.get_future()
work.wait()
want, against = gloo_or_reference(torch.float32, 100_000, dist.ReduceOp.SUM, 3)
expect("all_reduce async future", fut.value()[0], want, torch.float32, against)
expect("all_reduce async tensor", x, want, torch.float32, against)

# broadcast, all_gather: every dtype (bytes only), against the known inputs.
for dtype in DTYPES + [torch.bool, torch.uint8]:
    for root in sorted({0, 1, N - 1}):  # across hosts (2 x 2): each local index as the root
        for numel in SIZES:
            x = values(torch.int64, numel, RANK, 4).to(dtype)
            dist.broadcast(x, root)
            expect(f"broadcast {dtype} root {root} {numel}", x, values(torch.int64, numel, root, 4).to(dtype),
                   dtype, "reference")
    for numel in SIZES:
        outs = [torch.empty(numel, dtype=dtype) for _ in range(N)]
        dist.all_gather(outs, values(torch.int64, numel, RANK, 5).to(dtype))
        for q in range(N):
            expect(f"all_gather {dtype} {numel} from {q}", outs[q], values(torch.int64, numel, q, 5).to(dtype),
                   dtype, "reference")
if hasattr(dist, "all_gather_into_tensor"):
    out = torch.empty(N * 1000)
    dist.all_gather_into_tensor(out, values(torch.float32, 1000, RANK, 6))
    expect("all_gather_into_tensor", out, torch.cat([values(torch.float32, 1000, q, 6) for q in range(N)]),
           torch.float32, "reference")

# The operations that go through the Gloo group inside (or are composed of the fast ones).
for dtype in (torch.float32, torch.bfloat16, torch.int64):
    root = 1 % N
    x = values(dtype, 5000, RANK, 7)
    dist.reduce(x, root)
    if RANK == root:
        expect(f"reduce {dtype}", x, reference_all_reduce(dtype, 5000, dist.ReduceOp.SUM, 7), dtype, "reference")
    gathered = [torch.empty(700, dtype=dtype) for _ in range(N)] if RANK == root else None
    dist.gather(values(dtype, 700, RANK, 8), gathered, dst=root)
    if RANK == root:
        for q in range(N):
            expect(f"gather {dtype} from {q}", gathered[q], values(dtype, 700, q, 8), dtype, "reference")
    out = torch.empty(300, dtype=dtype)
    dist.scatter(out, [values(dtype, 300, q, 9) for q in range(N)] if RANK == root else None, src=root)
    expect(f"scatter {dtype}", out, values(dtype, 300, RANK, 9), dtype, "reference")
    out = torch.empty(400, dtype=dtype)
    dist.reduce_scatter(out, [values(dtype, 400, RANK, 10 + q) for q in range(N)])
    expect(f"reduce_scatter {dtype}", out, reference_all_reduce(dtype, 400, dist.ReduceOp.SUM, 10 + RANK), dtype,
           "reference")
    outs = [torch.empty(200, dtype=dtype) for _ in range(N)]
    dist.all_to_all(outs, [values(dtype, 200, RANK * N + q, 11) for q in range(N)])
    for q in range(N):
        expect(f"all_to_all {dtype} from {q}", outs[q], values(dtype, 200, q * N + RANK, 11), dtype, "reference")
out = torch.empty(N * 100)
dist.all_to_all_single(out, torch.cat([values(torch.float32, 100, RANK * N + q, 12) for q in range(N)]))
expect("all_to_all_single", out, torch.cat([values(torch.float32, 100, q * N + RANK, 12) for q in range(N)]),
       torch.float32, "reference")
if hasattr(dist, "reduce_scatter_tensor"):
    out = torch.empty(250)
    dist.reduce_scatter_tensor(out, torch.cat([values(torch.float32, 250, RANK, 20 + q) for q in range(N)]))
    expect("reduce_scatter_tensor", out, reference_all_reduce(torch.float32, 250, dist.ReduceOp.SUM, 20 + RANK),
           torch.float32, "reference")
if hasattr(dist, "all_reduce_coalesced"):
    parts = [values(torch.float32, 100, RANK, 13), values(torch.float32, 50, RANK, 14).reshape(5, 10)]
    dist.all_reduce_coalesced(parts)
    expect("all_reduce_coalesced first", parts[0], reference_all_reduce(torch.float32, 100, dist.ReduceOp.SUM, 13),
           torch.float32, "reference")
    expect("all_reduce_coalesced second", parts[1].flatten(),
           reference_all_reduce(torch.float32, 50, dist.ReduceOp.SUM, 14), torch.float32, "reference")
# Point to point (Gloo's, outside the queue): a ring.
send_to, recv_from = (RANK + 1) % N, (RANK - 1) % N
got = torch.empty(1000, dtype=torch.bfloat16)
reqs = [dist.isend(values(torch.bfloat16, 1000, RANK, 15), send_to), dist.irecv(got, recv_from)]
for req in reqs:
    req.wait()
del reqs  # Gloo's works hold tensors: drop them while the interpreter is whole
expect("send/recv ring bfloat16", got, values(torch.bfloat16, 1000, recv_from, 15), torch.bfloat16, "reference")

# The object collectives (through broadcast and all_gather), against the objects each rank gave.
objs = [{"from": RANK, "list": list(range(RANK * 100))}, "x" * (RANK + 1)]
dist.broadcast_object_list(objs, src=N - 1)
gathered = [None] * N
dist.all_gather_object(gathered, {"rank": RANK, "blob": "y" * (1000 * RANK)})
checks["reference"] += 2
if objs != [{"from": N - 1, "list": list(range((N - 1) * 100))}, "x" * N]:
    failures.append(f"rank {RANK}: broadcast_object_list gave {objs!r:.80}")
if gathered != [{"rank": q, "blob": "y" * (1000 * q)} for q in range(N)]:
    failures.append(f"rank {RANK}: all_gather_object gave {gathered!r:.80}")
dist.barrier()

# A sparse all-reduce (Gloo's, through the inner group): every rank's entries, summed.
def sparse_of(rank):
    return torch.sparse_coo_tensor([[rank, rank + 1]], [1.0 + rank, 10.0], (N + 2,))


sparse = sparse_of(RANK)
dist.all_reduce(sparse)
want = sum(sparse_of(q).to_dense() for q in range(N))
checks["reference"] += 1
if not torch.equal(sparse.to_dense(), want):
    failures.append(f"rank {RANK}: sparse all_reduce gave {sparse.to_dense().tolist()}, expected {want.tolist()}")

# torch's profiler sees the collectives, named as Gloo's are ("gloo:all_reduce"): "nano:all_reduce".
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiled:
    dist.all_reduce(torch.ones(64))
    dist.broadcast(torch.ones(64), src=0)
    dist.barrier()
seen = {e.name for e in profiled.events()}
checks["reference"] += 1
if not {"nano:all_reduce", "nano:broadcast", "nano:barrier"} <= seen:
    failures.append(f"rank {RANK}: the profiler saw {sorted(n for n in seen if ':' in n)}, not nano's collectives")

expect_shm = os.environ.get("EXPECT_SHM")
if expect_shm is not None and nano_torch.uses_shared_memory() != (expect_shm == "1"):
    failures.append(f"rank {RANK}: uses_shared_memory() is {nano_torch.uses_shared_memory()}, expected {expect_shm}")

expect_hierarchical = os.environ.get("EXPECT_HIERARCHICAL")
if expect_hierarchical is not None and nano_torch.hierarchical() != (expect_hierarchical == "1"):
    failures.append(f"rank {RANK}: hierarchical() is {nano_torch.hierarchical()}, expected {expect_hierarchical}")

for f in failures[:20]:
    print("MISMATCH " + f, flush=True)
if failures:
    sys.exit(1)
total = checks["gloo"] + checks["reference"]
print(f"collectives: {total} checks passed ({checks['gloo']} against Gloo's own result, {checks['reference']} "
      f"against the float64 reference or the known inputs)", flush=True)
# Every group goes before the interpreter's teardown, the comparison Gloo group first and for
# good (no name may keep it alive): its worker threads end while the interpreter still runs.
dist.destroy_process_group(GLOO)
del GLOO
GLOO_TENSORS.clear()
# Dropped with a future's Python callback still to run (a DDP communication hook's then()): the
# group lets the GIL go while its thread runs the callback (it waited for it, holding the GIL).
ran = []
dist.all_reduce(torch.ones(1 << 16), async_op=True).get_future().then(lambda f: ran.append(float(f.value()[0][0])))
dist.destroy_process_group()
if ran != [float(N)]:
    print(f"MISMATCH rank {RANK}: the all-reduce's callback ran with {ran}, expected [{float(N)}]", flush=True)
    sys.exit(1)
