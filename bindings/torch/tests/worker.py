"""One rank of a backend test, started by launch.py:

    python3 worker.py SCENARIO OUTDIR      (env: RANK, WORLD_SIZE, MASTER_ADDR,
                                            MASTER_PORT, TEST_BACKEND, TEST_TIMEOUT)

Each scenario writes OUTDIR/rank<R>.json (and .pt files for tensors).
Scenarios: methods (every collective against closed-form values), ddp, zero
(training runs whose weights the test compares with a single-process
reference), kill (the last rank dies mid-loop; the others must raise),
p2p_mismatch (a send and its receive of different sizes), p2p_order
(isend/irecv posted in orders that deadlock when each runs as it is
posted), call_timeout (per-call timeouts while a peer stays away),
node_groups (hoccl_torch.node_groups over emulated nodes), paro
(paro_scenario.py), mesh (mesh_scenario.py: DeviceMesh, DTensor and tensor
parallelism, torch 2.x).
"""
import datetime
import json
import math
import os
import random
import signal
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn as nn

import hoccl_torch
import model_common

RANK = int(os.environ["RANK"])
N = int(os.environ["WORLD_SIZE"])
BACKEND = os.environ.get("TEST_BACKEND", "hoccl")

# ---- the method checks -------------------------------------------------------
# Each check runs on every rank in the same order; it raises on a wrong value.
# Checks that validate arguments raise on every rank before any rank calls
# hoccl, so a failing check cannot leave the ranks out of step.

CHECKS = []


def check(fn):
    CHECKS.append((fn.__name__, fn))
    return fn


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int8, torch.uint8, torch.int32, torch.int64]
OPS = {"SUM": dist.ReduceOp.SUM, "PRODUCT": dist.ReduceOp.PRODUCT, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "AVG": dist.ReduceOp.AVG}
S = N * (N + 1) // 2  # sum of rank+1 over the ranks


def expect(got, want, what):
    want = want.to(got.dtype) if isinstance(want, torch.Tensor) else torch.full_like(got, want)
    if got.shape != want.shape or not torch.equal(got, want):
        raise AssertionError(f"{what}: got {got.tolist()}, expected {want.tolist()}")


def expect_raises(fn, *words):
    try:
        fn()
    except (RuntimeError, ValueError) as e:  # torch 2.x refuses some arguments itself, with ValueError
        msg = str(e)
        for w in words:
            if w not in msg:
                raise AssertionError(f"the error does not name {w!r}: {msg}")
        return
    raise AssertionError(f"no RuntimeError naming {words}")


@check
def all_reduce_ops_dtypes():
    closed = {"SUM": S, "PRODUCT": math.factorial(N), "MIN": 1, "MAX": N, "AVG": (N + 1) / 2}
    for dt in DTYPES:
        for name, op in OPS.items():
            if name == "AVG" and not dt.is_floating_point:
                continue  # integer AVG truncates differently per library; not promised
            t = torch.full((5,), RANK + 1, dtype=dt)
            dist.all_reduce(t, op=op)
            expect(t, torch.full((5,), closed[name], dtype=torch.float64), f"all_reduce {name} {dt}")


@check
def all_reduce_bool():
    # SUM is a logical or, PRODUCT / MIN a logical and, MAX an or.
    for name, want in (("SUM", True), ("MAX", True), ("PRODUCT", N == 1), ("MIN", N == 1)):
        t = torch.full((3,), RANK == N - 1, dtype=torch.bool)
        dist.all_reduce(t, op=OPS[name])
        expect(t, torch.full((3,), want), f"all_reduce {name} bool")
    expect_raises(lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool), op=dist.ReduceOp.AVG), "AVG", "bool")


@check
def all_reduce_complex():
    t = torch.full((4,), complex(RANK + 1, RANK), dtype=torch.complex64)
    dist.all_reduce(t)
    expect(t, torch.full((4,), complex(S, N * (N - 1) / 2), dtype=torch.complex64), "all_reduce SUM complex64")
    expect_raises(lambda: dist.all_reduce(t, op=dist.ReduceOp.MAX), "complex")  # torch itself refuses it


@check
def unsupported_ops_and_dtypes():
    for name in ("BAND", "BOR", "BXOR"):
        op = getattr(dist.ReduceOp, name)
        expect_raises(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int32), op=op), name)
    expect_raises(lambda: dist.all_reduce(torch.ones(2, dtype=torch.int16)), "Short", "not supported")
    expect_raises(lambda: dist.reduce_scatter_tensor(torch.ones(1, dtype=torch.int32),
                                                     torch.ones(N, dtype=torch.int32), op=dist.ReduceOp.BAND),
                  "BAND")


@check
def premul_sum():
    # Each rank scales its own contribution by its factor, then all are summed.
    for dt in (torch.float32, torch.float64, torch.bfloat16, torch.int32):
        t = torch.full((5,), RANK + 1, dtype=dt)
        dist.all_reduce(t, op=dist._make_nccl_premul_sum(2.0))
        expect(t, 2 * S, f"all_reduce PREMUL_SUM(2.0) {dt}")
    t = torch.full((3,), float(RANK + 1))
    factor = torch.tensor([float(RANK + 1)])  # torch 1.13 takes a list of one tensor per device, 2.x the tensor
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor if hoccl_torch.TORCH2 else [factor]))
    expect(t, sum((r + 1) ** 2 for r in range(N)), "all_reduce PREMUL_SUM(tensor factor = rank + 1)")
    out = torch.empty(2)
    dist.reduce_scatter_tensor(out, torch.ones(2 * N), op=dist._make_nccl_premul_sum(0.5))
    expect(out, 0.5 * N, "reduce_scatter_tensor PREMUL_SUM(0.5)")
    t = torch.full((2,), float(RANK + 1))
    dist.reduce(t, dst=0, op=dist._make_nccl_premul_sum(3.0))
    if RANK == 0:
        expect(t, 3 * S, "reduce PREMUL_SUM(3.0)")
    expect_raises(lambda: dist.all_reduce(torch.ones(2, dtype=torch.bool), op=dist._make_nccl_premul_sum(2.0)),
                  "PREMUL_SUM", "bool")


@check
def all_reduce_non_contiguous():
    base = torch.arange(12.0).reshape(3, 4) * (RANK + 1)
    view = base.t()  # a transposed view: not contiguous
    dist.all_reduce(view)
    expect(view, torch.arange(12.0).reshape(3, 4).t() * S, "all_reduce on a transposed view")
    expect(base, torch.arange(12.0).reshape(3, 4) * S, "the view's base after all_reduce")
    strided = torch.zeros(10)
    strided[::2] = RANK + 1
    dist.all_reduce(strided[::2])
    expect(strided, torch.tensor([S, 0] * 5, dtype=torch.float32), "all_reduce on every other element")


@check
def all_reduce_async_future():
    t = torch.full((6,), float(RANK + 1))
    work = dist.all_reduce(t, async_op=True)
    values = work.get_future().wait()
    work.wait()
    if not work.is_completed() or not work.is_success():
        raise AssertionError("the work is not completed and successful after wait()")
    expect(values[0], S, "the future's value")
    # Several in flight at once complete in order, each with its own result.
    ts = [torch.full((3,), float(RANK + k)) for k in range(4)]
    works = [dist.all_reduce(x, async_op=True) for x in ts]
    for k, (x, w) in enumerate(zip(ts, works)):
        w.wait()
        expect(x, N * k + N * (N - 1) / 2, f"async all_reduce {k}")


@check
def all_reduce_coalesced():
    a = torch.full((2, 3), float(RANK + 1))
    b = torch.full((5,), float(2 * (RANK + 1)))
    dist.all_reduce_coalesced([a, b])
    expect(a, S, "all_reduce_coalesced first")
    expect(b, 2 * S, "all_reduce_coalesced second")
    expect_raises(lambda: dist.all_reduce_coalesced([a, torch.ones(2, dtype=torch.float64)]), "dtype")


@check
def broadcast_every_root_and_dtype():
    for root in range(N):
        for dt in DTYPES + [torch.bool]:
            t = torch.full((7,), (RANK + 3) % 2 if dt == torch.bool else RANK * 10 + 1, dtype=dt)
            dist.broadcast(t, src=root)
            expect(t, (root + 3) % 2 if dt == torch.bool else root * 10 + 1, f"broadcast {dt} from {root}")
    t = torch.arange(12.0).reshape(3, 4).t().clone().t() * (RANK + 1)  # non-contiguous
    dist.broadcast(t, src=N - 1)
    expect(t, torch.arange(12.0).reshape(3, 4) * N, "broadcast into a non-contiguous tensor")


@check
def reduce_to_each_root():
    for root in range(N):
        for name in ("SUM", "MAX"):
            t = torch.full((4,), float(RANK + 1))
            dist.reduce(t, dst=root, op=OPS[name])
            if RANK == root:
                expect(t, S if name == "SUM" else N, f"reduce {name} to {root}")


@check
def all_gather_list():
    for dt in (torch.float32, torch.int64, torch.bool, torch.bfloat16):
        out = [torch.empty((2, 2), dtype=dt) for _ in range(N)]
        dist.all_gather(out, torch.full((2, 2), RANK % 2 if dt == torch.bool else RANK, dtype=dt))
        for i, o in enumerate(out):
            expect(o, i % 2 if dt == torch.bool else i, f"all_gather {dt} slot {i}")


@check
def all_gather_into_tensor():
    for dt in (torch.float32, torch.float16, torch.int64):
        inp = torch.arange(3, dtype=dt) + 10 * RANK
        flat = torch.empty(N * 3, dtype=dt)
        dist.all_gather_into_tensor(flat, inp)
        want = torch.cat([torch.arange(3) + 10 * i for i in range(N)])
        expect(flat, want, f"all_gather_into_tensor {dt}")
        stacked = torch.empty((N, 3), dtype=dt)
        dist.all_gather_into_tensor(stacked, inp)
        expect(stacked, want.reshape(N, 3), f"all_gather_into_tensor stacked {dt}")
    expect_raises(lambda: dist.all_gather_into_tensor(torch.empty(N * 3 + 1), torch.ones(3)), "elements")


@check
def reduce_scatter_list():
    inputs = [torch.full((3,), float(RANK + j)) for j in range(N)]
    out = torch.empty(3)
    dist.reduce_scatter(out, inputs)
    expect(out, N * (N - 1) / 2 + N * RANK, "reduce_scatter SUM")
    inputs = [torch.full((3,), float(RANK + j + 1)) for j in range(N)]
    dist.reduce_scatter(out, inputs, op=dist.ReduceOp.MAX)
    expect(out, N + RANK, "reduce_scatter MAX")
    # Uneven blocks (as torch's NCCL backend runs them: one reduce per
    # destination): rank j's output has j + 1 elements.
    for name, op in (("SUM", dist.ReduceOp.SUM), ("MAX", dist.ReduceOp.MAX), ("AVG", dist.ReduceOp.AVG)):
        inputs = [torch.arange(j + 1, dtype=torch.float64) + RANK for j in range(N)]
        out = torch.empty(RANK + 1, dtype=torch.float64)
        dist.reduce_scatter(out, inputs, op=op)
        base = torch.arange(RANK + 1, dtype=torch.float64)
        want = {"SUM": base * N + S - N, "MAX": base + N - 1, "AVG": base + (S - N) / N}[name]
        expect(out, want, f"reduce_scatter uneven {name}")
    expect_raises(lambda: dist.reduce_scatter(torch.empty(RANK + 2),
                                              [torch.ones(j + 1) for j in range(N)]), "elements")


@check
def reduce_scatter_tensor():
    for dt in (torch.float32, torch.float64, torch.int32, torch.bfloat16):
        inp = torch.arange(N * 3, dtype=dt) + RANK
        out = torch.empty(3, dtype=dt)
        dist.reduce_scatter_tensor(out, inp)
        want = torch.arange(RANK * 3, RANK * 3 + 3) * N + N * (N - 1) // 2
        expect(out, want, f"reduce_scatter_tensor SUM {dt}")
    inp = (torch.arange(N * 2.0) + RANK).reshape(N, 2)
    out = torch.empty(2)
    dist.reduce_scatter_tensor(out, inp, op=dist.ReduceOp.AVG)
    expect(out, torch.arange(RANK * 2.0, RANK * 2 + 2) + (N - 1) / 2, "reduce_scatter_tensor AVG")


@check
def barrier():
    for _ in range(3):
        dist.barrier()


@check
def gather_and_scatter():
    for root in (0, N - 1):
        inp = torch.full((2,), float(RANK))
        gl = [torch.empty(2) for _ in range(N)] if RANK == root else None
        dist.gather(inp, gather_list=gl, dst=root)
        if RANK == root:
            for i, g in enumerate(gl):
                expect(g, i, f"gather to {root} slot {i}")
        out = torch.empty(2)
        sl = [torch.full((2,), 100.0 + i) for i in range(N)] if RANK == root else None
        dist.scatter(out, scatter_list=sl, src=root)
        expect(out, 100 + RANK, f"scatter from {root}")


@check
def all_to_all_single():
    # Equal splits: rank r's rows 2j, 2j+1 go to rank j.
    inp = torch.arange(N * 2.0) + 100 * RANK
    out = torch.empty(N * 2)
    dist.all_to_all_single(out, inp)
    want = torch.cat([torch.tensor([100.0 * j + 2 * RANK, 100.0 * j + 2 * RANK + 1]) for j in range(N)])
    expect(out, want, "all_to_all_single, equal splits")
    # Uneven: rank r sends j+1 rows of 2 to rank j, valued 1000 r + 10 j + k.
    in_splits = [j + 1 for j in range(N)]
    rows = torch.cat([torch.tensor([1000.0 * RANK + 10 * j + k for k in range(j + 1)]) for j in range(N)])
    inp = torch.stack([rows, -rows], dim=1)
    out = torch.empty((N * (RANK + 1), 2))
    dist.all_to_all_single(out, inp, output_split_sizes=[RANK + 1] * N, input_split_sizes=in_splits)
    rows = torch.cat([torch.tensor([1000.0 * j + 10 * RANK + k for k in range(RANK + 1)]) for j in range(N)])
    expect(out, torch.stack([rows, -rows], dim=1), "all_to_all_single, uneven splits")


@check
def all_to_all_list():
    inputs = [torch.full((j + 1,), 10 * RANK + j, dtype=torch.int64) for j in range(N)]
    outputs = [torch.empty((RANK + 1,), dtype=torch.int64) for _ in range(N)]
    dist.all_to_all(outputs, inputs)
    for j, o in enumerate(outputs):
        expect(o, 10 * j + RANK, f"all_to_all from {j}")


@check
def objects():
    objs = [None] * N
    dist.all_gather_object(objs, {"rank": RANK, "name": "x" * RANK})
    if objs != [{"rank": i, "name": "x" * i} for i in range(N)]:
        raise AssertionError(f"all_gather_object: {objs}")
    lst = [RANK, "from"] if RANK == N - 1 else [None, None]
    dist.broadcast_object_list(lst, src=N - 1)
    if lst != [N - 1, "from"]:
        raise AssertionError(f"broadcast_object_list: {lst}")


@check
def send_recv_ring_shift():
    # Blocking pairs in an order that cannot deadlock: even ranks send
    # first. Tags are ignored (hoccl has none).
    if N == 1:
        return  # a rank sends to itself only within a batch of queued isend/irecv
    for dt in (torch.float32, torch.int64, torch.bfloat16):
        nxt, prev = (RANK + 1) % N, (RANK - 1) % N
        out = torch.full((7,), RANK * 10 + 1, dtype=dt)
        got = torch.empty(7, dtype=dt)
        if RANK % 2 == 0:
            dist.send(out, dst=nxt, tag=3)
            dist.recv(got, src=prev, tag=99)
        else:
            dist.recv(got, src=prev)
            dist.send(out, dst=nxt)
        expect(got, prev * 10 + 1, f"ring shift {dt}: from rank {prev}")


@check
def send_recv_several_to_one_peer():
    # Rank 0 sends three messages of different sizes to the last rank, which
    # receives them in the same order; a non-contiguous tensor is sent too.
    if N == 1:
        return
    last = N - 1
    if RANK == 0:
        works = [dist.isend(torch.full((k + 1,), 100.0 + k), dst=last) for k in range(3)]
        works.append(dist.isend(torch.arange(12.0).view(3, 4).t(), dst=last))
        for w in works:
            w.wait()
    elif RANK == last:
        bufs = [torch.empty(k + 1) for k in range(3)] + [torch.empty(4, 3)]
        works = [dist.irecv(b, src=0) for b in bufs]
        for w in works:
            w.wait()
        for k in range(3):
            expect(bufs[k], 100 + k, f"message {k} from rank 0")
        expect(bufs[3], torch.arange(12.0).view(3, 4).t(), "non-contiguous message from rank 0")
    dist.barrier()


@check
def recv_anysource_raises():
    expect_raises(lambda: dist.recv(torch.ones(2)), "recvAnysource")


@check
def new_groups():
    # Every rank calls new_group; only members get a process group.
    pair = sorted({0, N - 1})
    g = dist.new_group(pair)
    if RANK in pair:
        t = torch.full((3,), float(RANK + 1))
        dist.all_reduce(t, group=g)
        expect(t, sum(r + 1 for r in pair), "all_reduce in new_group([0, n-1])")
        if dist.get_world_size(g) != len(pair) or dist.get_rank(g) != pair.index(RANK):
            raise AssertionError("new_group rank or size")
    # A group with its own algorithm, and one with ranks in reverse order.
    ring = dist.new_group(list(range(N)), pg_options=hoccl_torch.Options(algorithm="ring"))
    t = torch.full((1000,), float(RANK + 1))
    dist.all_reduce(t, group=ring)
    expect(t, S, "all_reduce in a ring group")
    odd = [r for r in range(N) if r % 2 == 1]
    g_odd = dist.new_group(odd) if odd else None
    if RANK in odd:
        out = torch.empty(len(odd))
        dist.all_gather_into_tensor(out, torch.tensor([float(RANK)]), group=g_odd)
        expect(out, torch.tensor(odd, dtype=torch.float32), "all_gather_into_tensor in the odd ranks' group")
    dist.barrier()


@check
def subgroups_come_from_the_world_communicator():
    # new_group's members make it from the world's communicator
    # (hocclCommCreateGroup): no rendezvous through the store.
    world = hoccl_torch.backend_of()
    if world.origin != "rendezvous":
        raise AssertionError(f"the default group was made by {world.origin}")
    members = list(range(N - 1, -1, -2))  # every other rank, last first: group rank 0 is rank N-1
    g = dist.new_group(members)
    if RANK in members:
        b = hoccl_torch.backend_of(g)
        if b is None or b.origin != "create_group":
            raise AssertionError(f"new_group made by {b.origin if b else 'another backend'}")
        if dist.get_rank(g) != sorted(members).index(RANK):
            raise AssertionError(f"group rank {dist.get_rank(g)} in new_group({members})")
        t = torch.full((2,), float(RANK + 1))
        dist.all_reduce(t, group=g)
        expect(t, sum(r + 1 for r in members), "all_reduce in a group made from the world's communicator")
        out = torch.empty(len(members))
        dist.all_gather_into_tensor(out, torch.tensor([float(RANK)]), group=g)
        expect(out, torch.tensor(sorted(members), dtype=torch.float32), "all_gather_into_tensor in it")
    dist.barrier()


@check
def shutdown_ends_a_group():
    g = dist.new_group(list(range(N)))
    t = torch.ones(3)
    dist.all_reduce(t, group=g)
    expect(t, N, "all_reduce before shutdown")
    hoccl_torch.shutdown(g)
    expect_raises(lambda: dist.all_reduce(t, group=g), "shut down")
    dist.all_reduce(t)  # the default group is untouched
    expect(t, N * N, "all_reduce on the default group after a subgroup's shutdown")


@check
def coalesced_into_tensor():
    b = hoccl_torch.backend_of()
    # One dtype: packed into one hoccl call.
    ins = [torch.full((3,), float(RANK + 1)), torch.arange(2.0) + 10 * RANK]
    outs = [torch.empty(3 * N), torch.empty(2 * N)]
    b._allgather_into_tensor_coalesced(outs, ins).wait()
    expect(outs[0], torch.cat([torch.full((3,), float(r + 1)) for r in range(N)]), "coalesced all-gather 0")
    expect(outs[1], torch.cat([torch.arange(2.0) + 10 * r for r in range(N)]), "coalesced all-gather 1")
    ins = [torch.arange(2.0 * N) * (RANK + 1), torch.ones(3 * N).reshape(N, 3)]
    outs = [torch.empty(2), torch.empty(1, 3)]
    b._reduce_scatter_tensor_coalesced(outs, ins).wait()
    expect(outs[0], (torch.arange(2.0) + 2 * RANK) * S, "coalesced reduce-scatter 0")
    expect(outs[1], torch.full((1, 3), float(N)), "coalesced reduce-scatter 1")
    # Mixed dtypes: one call per pair.
    ins = [torch.full((2,), RANK + 1, dtype=torch.int32), torch.full((1,), float(RANK), dtype=torch.float64)]
    outs = [torch.empty(2 * N, dtype=torch.int32), torch.empty(N, dtype=torch.float64)]
    b._allgather_into_tensor_coalesced(outs, ins).wait()
    expect(outs[0], torch.tensor([r + 1 for r in range(N) for _ in range(2)]), "coalesced all-gather, int32")
    expect(outs[1], torch.arange(float(N)), "coalesced all-gather, float64")
    expect_raises(lambda: b._allgather_into_tensor_coalesced([torch.empty(N + 1)], [torch.empty(1)]), "uneven")
    expect_raises(lambda: dist.all_gather_into_tensor(torch.empty(N + 1), torch.empty(1)), "uneven")
    expect_raises(lambda: dist.reduce_scatter_tensor(torch.empty(1), torch.empty(N + 1)), "uneven")
    if not hoccl_torch.TORCH2:
        return
    # As torch 2.x runs them: _coalescing_manager calls the coalesced
    # methods; with a device it also brackets them (start/endCoalescing).
    for device in (None, torch.device("cpu")):
        o1, o2 = torch.empty(2 * N), torch.empty(N)
        with dist.distributed_c10d._coalescing_manager(device=device):
            dist.all_gather_into_tensor(o1, torch.full((2,), float(RANK)))
            dist.all_gather_into_tensor(o2, torch.full((1,), float(-RANK)))
        expect(o1, torch.tensor([float(r) for r in range(N) for _ in range(2)]), f"coalescing manager ({device})")
        expect(o2, -torch.arange(float(N)), f"coalescing manager ({device}), second")
        r1 = torch.empty(2)
        with dist.distributed_c10d._coalescing_manager(device=device):
            dist.reduce_scatter_tensor(r1, torch.ones(2 * N))
        expect(r1, float(N), f"coalescing manager reduce-scatter ({device})")


@check
def large_and_empty():
    t = torch.full((1 << 20,), float(RANK + 1))
    dist.all_reduce(t)
    expect(t, S, "all_reduce of 1 Mi floats")
    e = torch.empty(0)
    dist.all_reduce(e)
    dist.broadcast(e, src=0)


def run_each(cases, with_trace):
    """Runs every (name, fn); records None or the error, per case (the test names it)."""
    results = {}
    for name, fn in cases:
        try:
            fn()
            results[name] = None
        except Exception as e:  # recorded per case; the test names it
            results[name] = f"{type(e).__name__}: {e}" + (f"\n{traceback.format_exc()}" if with_trace else "")
    return results


def run_methods(out):
    out["checks"] = run_each(CHECKS, with_trace=True)


# ---- training ----------------------------------------------------------------


def run_ddp(out, outdir):
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(model_common.make_model(), bucket_cap_mb=0.001)  # several buckets
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for step in range(model_common.STEPS):
        x, y = model_common.batch(step, RANK)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    torch.save(model.module.state_dict(), os.path.join(outdir, f"weights{RANK}.pt"))
    out["losses"] = losses


def run_zero(out, outdir):
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(model_common.make_model())
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=0.01)
    for step in range(model_common.STEPS):
        x, y = model_common.batch(step, RANK)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    opt.consolidate_state_dict(to=0)
    torch.save(model.module.state_dict(), os.path.join(outdir, f"weights{RANK}.pt"))
    if RANK == 0:
        torch.save(opt.state_dict(), os.path.join(outdir, "optim.pt"))


def run_p2p_mismatch(out):
    # Rank 0 sends 4 floats; rank 1 posts a receive of 5: rank 1 (and rank
    # 0, if its send waits) raises with hoccl's message.
    try:
        if RANK == 0:
            dist.send(torch.ones(4), dst=1)
        else:
            dist.recv(torch.empty(5), src=0)
        out["error"] = None
    except RuntimeError as e:
        out["error"] = str(e)


def run_root_mismatch(out):
    # Every rank reduces to itself (dst=RANK), at a size past the one-shot
    # path: the roots differ, so each rank waits to receive; hoccl must name
    # the roots at once instead of waiting for the group's timeout.
    t = torch.ones(int(os.environ.get("TEST_COUNT", "129")))
    start = time.monotonic()
    try:
        dist.reduce(t, dst=RANK)
        dist.all_reduce(t)  # a rank whose part completed learns it here
        out["error"] = None
    except RuntimeError as e:
        out["error"] = str(e)
    out["seconds"] = time.monotonic() - start


# ---- point to point in any order ----------------------------------------------
# Each case sleeps between its posts, so that the backend's worker could have
# started the first one before the next is posted: a send that waits for its
# receiver, started alone on every rank, would deadlock.

PAUSE = 0.2  # seconds between posts
BIG = 1 << 20  # floats per message: more than a send buffers without its receiver


def expect_all(got, value, what):
    if not torch.equal(got, torch.full_like(got, value)):
        raise AssertionError(f"{what}: got {got[:4].tolist()}..., expected {value}")


def _ring(finish):
    nxt, prev = (RANK + 1) % N, (RANK - 1) % N
    got = torch.empty(BIG)
    s = dist.isend(torch.full((BIG,), float(RANK)), dst=nxt)
    time.sleep(PAUSE)
    r = dist.irecv(got, src=prev)
    time.sleep(PAUSE)
    finish(s, r)
    expect_all(got, prev, f"ring: from rank {prev}")


def _poll(works):
    while not all(w.is_completed() for w in works):
        time.sleep(0.001)
    for w in works:
        w.wait()  # completed: raises its error, if any


def _all_peers():
    # Every rank sends to every rank (itself too) and receives from every
    # rank, in a shuffled order of its own; then waits in another order.
    rng = random.Random(1000 + RANK)
    ops = [("send", p) for p in range(N)] + [("recv", p) for p in range(N)]
    rng.shuffle(ops)
    got = {p: torch.empty(BIG // 4) for p in range(N)}
    works = []
    for kind, p in ops:
        if kind == "send":
            works.append(dist.isend(torch.full((BIG // 4,), 100.0 * RANK + p), dst=p))
        else:
            works.append(dist.irecv(got[p], src=p))
        time.sleep(PAUSE / 2)
    rng.shuffle(works)
    for w in works:
        w.wait()
    for p in range(N):
        expect_all(got[p], 100 * p + RANK, f"all peers: from rank {p}")


def _batch():
    # batch_isend_irecv with the sends and receives in a shuffled order.
    rng = random.Random(2000 + RANK)
    got = {p: torch.empty(BIG // 8) for p in range(N)}
    ops = [dist.P2POp(dist.isend, torch.full((BIG // 8,), 10.0 * RANK + p), p) for p in range(N)]
    ops += [dist.P2POp(dist.irecv, got[p], p) for p in range(N)]
    rng.shuffle(ops)
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    for p in range(N):
        expect_all(got[p], 10 * p + RANK, f"batch_isend_irecv: from rank {p}")


def _ring_blocking_recv():
    # isend to the next rank, then a blocking recv from the previous one.
    nxt, prev = (RANK + 1) % N, (RANK - 1) % N
    got = torch.empty(BIG)
    s = dist.isend(torch.full((BIG,), float(RANK)), dst=nxt)
    time.sleep(PAUSE)
    dist.recv(got, src=prev)
    s.wait()
    expect_all(got, prev, f"ring, blocking recv: from rank {prev}")


P2P_CASES = {
    "ring_wait": lambda: _ring(lambda s, r: (r.wait(), s.wait())),
    "ring_poll": lambda: _ring(lambda s, r: _poll([s, r])),
    "ring_future": lambda: _ring(lambda s, r: (s.get_future().wait(), r.get_future().wait())),
    "ring_blocking_recv": _ring_blocking_recv,
    "all_peers": _all_peers,
    "batch": _batch,
}


def run_p2p_order(out):
    out["cases"] = run_each(P2P_CASES.items(), with_trace=False)


# ---- per-call timeouts ---------------------------------------------------------


def _timed(fn):
    start = time.monotonic()
    try:
        fn()
        err = None
    except RuntimeError as e:
        err = str(e)
    return err, time.monotonic() - start


def run_call_timeout(out):
    # Rank 0 calls all-reduces that rank 1 never joins: one with a timeout in
    # its options, one waited with Work.wait(timeout), one with a timeout
    # queued behind one without. Each group is aborted by its timeout, so
    # each case has a group of its own.
    store = dist.distributed_c10d._get_default_store()
    g_opts, g_wait, g_queued = dist.new_group([0, 1]), dist.new_group([0, 1]), dist.new_group([0, 1])
    if RANK == 0:
        opts = dist.AllreduceOptions()
        opts.timeout = datetime.timedelta(seconds=1)
        out["opts_error"], out["opts_seconds"] = _timed(lambda: g_opts.allreduce([torch.ones(4)], opts).wait())
        out["opts_other_error"], _ = _timed(lambda: dist.all_reduce(torch.ones(4), group=g_opts))
        work = dist.all_reduce(torch.ones(4), group=g_wait, async_op=True)
        out["wait_error"], out["wait_seconds"] = _timed(lambda: work.wait(datetime.timedelta(seconds=1)))
        out["wait_other_error"], _ = _timed(lambda: dist.all_reduce(torch.ones(4), group=g_wait))
        # Queued behind a call without a timeout that waits for rank 1.
        first = dist.all_reduce(torch.ones(4), group=g_queued, async_op=True)
        out["queued_error"], out["queued_seconds"] = _timed(lambda: g_queued.allreduce([torch.ones(4)], opts).wait())
        out["queued_other_error"], _ = _timed(first.wait)
        store.set("call_timeout/done", "1")
    else:
        store.wait(["call_timeout/done"])
    t = torch.ones(3)
    dist.all_reduce(t)  # the default group is untouched
    out["world_sum"] = t[0].item()


def run_node_groups(out):
    # HOCCL_HOSTID makes ranks 2k and 2k+1 node k (set by the test).
    intra, rail = hoccl_torch.node_groups()
    node, local = RANK // 2, RANK % 2
    out["intra"] = [dist.get_rank(intra), dist.get_world_size(intra)]
    out["rail"] = [dist.get_rank(rail), dist.get_world_size(rail)]
    t = torch.full((3,), float(RANK + 1))
    dist.all_reduce(t, group=intra)
    out["intra_sum"] = t[0].item()
    t = torch.full((3,), float(RANK + 1))
    dist.all_reduce(t, group=rail)
    out["rail_sum"] = t[0].item()
    # A root given as a global rank is translated through the group.
    b = torch.full((2,), float(RANK))
    dist.broadcast(b, src=2 * (N // 2 - 1) + local, group=rail)
    out["rail_bcast"] = b[0].item()
    g = torch.empty(2, dtype=torch.int64)
    dist.all_gather_into_tensor(g, torch.tensor([RANK]), group=intra)
    out["intra_members"] = g.tolist()
    out["node"], out["local"] = node, local
    dist.barrier()


def run_kill(out):
    t = torch.ones(1 << 12)
    last = time.monotonic()
    try:
        for i in range(100000):
            if RANK == N - 1 and i == 20:
                os.kill(os.getpid(), signal.SIGKILL)
            dist.all_reduce(t)
            t.fill_(1.0)
            last = time.monotonic()
        out["error"] = None
    except RuntimeError as e:
        out["error"] = str(e)
        out["seconds_after_last_success"] = time.monotonic() - last


def wait_until_all_past_init(seconds):
    # torch 1.13's init ends in a barrier that every rank polls on rank 0's
    # TCPStore. A scenario that ends at once (p2p_mismatch exits) let rank 0
    # take the store down while rank 1 still polled: "Connection reset by
    # peer" inside init_process_group (seen once in CI). So each rank says
    # it is past init, and rank 0, the store's host, waits for all of them.
    store = dist.distributed_c10d._get_default_store()
    store.add("worker_past_init", 1)
    if RANK != 0:
        return
    deadline = time.monotonic() + seconds
    while store.add("worker_past_init", 0) < N:
        if time.monotonic() > deadline:
            sys.exit(f"rank 0: not every rank got past init_process_group in {seconds} s")
        time.sleep(0.005)


def main():
    scenario, outdir = sys.argv[1], sys.argv[2]
    timeout = datetime.timedelta(seconds=float(os.environ.get("TEST_TIMEOUT", "60")))
    dist.init_process_group(BACKEND, rank=RANK, world_size=N, timeout=timeout)
    wait_until_all_past_init(timeout.total_seconds())
    out = {"rank": RANK, "size": N, "backend": BACKEND}
    if scenario == "methods":
        run_methods(out)
    elif scenario == "ddp":
        run_ddp(out, outdir)
    elif scenario == "zero":
        run_zero(out, outdir)
    elif scenario == "kill":
        run_kill(out)
    elif scenario == "p2p_mismatch":
        run_p2p_mismatch(out)
    elif scenario == "root_mismatch":
        run_root_mismatch(out)
    elif scenario == "p2p_order":
        run_p2p_order(out)
    elif scenario == "call_timeout":
        run_call_timeout(out)
    elif scenario == "node_groups":
        run_node_groups(out)
    elif scenario == "mesh":
        import mesh_scenario
        mesh_scenario.run(out, outdir, RANK)
    elif scenario == "shrink":
        import shrink_scenario
        shrink_scenario.run(out, RANK, N)
    elif scenario == "paro":
        import paro_scenario
        paro_scenario.run(out, outdir, RANK)
    else:
        sys.exit(f"unknown scenario {scenario}")
    with open(os.path.join(outdir, f"rank{RANK}.json"), "w") as f:
        json.dump(out, f)
    if scenario in ("kill", "p2p_mismatch", "root_mismatch", "call_timeout"):
        os._exit(0)  # the group is broken: skip the orderly teardown
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
