"""Training that survives a lost rank: DDP on hoccl at 4 processes, one is
killed (SIGKILL) mid-training, and the 3 survivors shrink the process group
(hoccl_torch.shrink: hocclCommShrink, no new rendezvous), reload the last
checkpoint's shards and finish the training among themselves.

    /usr/bin/python3 ddp_shrink.py                 # kill rank 3 at step 12, then check
    /usr/bin/python3 ddp_shrink.py --kill-rank 1 --kill-step 20 --dir /tmp/shrink

It then runs the reference: 3 fresh processes (a new hoccl group) resume
from the same checkpoint and train the same steps. The survivors' final
weights must equal the reference's; the last line is a JSON summary
({"equal": true, "max_abs_diff": 0.0, ...}) and the exit status is 0 only
if they are equal.

How the pieces fit:
- Data: step s has one global batch of --global-batch samples (seeded by
  s); a rank trains on its contiguous slice. DDP averages the gradients,
  so any world size that divides the batch follows the same path.
- Checkpoint every --ckpt-every steps: the parameters and the momentum
  buffers laid end to end, cut into one shard per rank; rank r writes shard
  r. A checkpoint counts once every shard is written (rank 0 marks it
  after an all-reduce). The files must be where every rank can read them
  (here: one directory on one host).
- Who is gone: after a failed step each survivor checks in on the
  torch.distributed store and waits --grace seconds for the others; the
  ranks that did not check in are excluded. The store lives in rank 0's
  process, so this example cannot lose rank 0.
"""
import argparse
import datetime
import json
import os
import signal
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import hoccl_torch


def mlp(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 4))


def global_batch(step, n):
    g = torch.Generator().manual_seed(10_000 + step)
    x = torch.randn(n, 16, generator=g)
    y = torch.sin(x[:, :4] * 2) + 0.1 * x[:, 4:8]
    return x, y


def flat_state(model, opt):
    """Parameters, then momentum buffers (zeros before the first step), end to end."""
    params = [p.detach().reshape(-1) for p in model.parameters()]
    moms = []
    for p in model.parameters():
        buf = opt.state.get(p, {}).get("momentum_buffer")
        moms.append((buf if buf is not None else torch.zeros_like(p)).reshape(-1))
    return torch.cat(params + moms)


def load_flat(model, opt, flat):
    ps = list(model.parameters())
    at = 0
    with torch.no_grad():
        for p in ps:
            p.copy_(flat[at:at + p.numel()].view_as(p))
            at += p.numel()
    for p in ps:
        opt.state[p]["momentum_buffer"] = flat[at:at + p.numel()].view_as(p).clone()
        at += p.numel()


def save_shard(args, step, rank, world, model, opt, group):
    flat = flat_state(model, opt)
    shard = flat.tensor_split(world)[rank].clone()
    d = os.path.join(args.dir, f"ckpt{step:05d}")
    os.makedirs(d, exist_ok=True)
    torch.save(shard, os.path.join(d, f"shard{rank}of{world}.pt"))
    done = torch.ones(1)
    dist.all_reduce(done, group=group)  # every shard is on disk
    if rank == 0 and done.item() == world:
        with open(os.path.join(d, "complete"), "w") as f:
            f.write(f"{world}\n")


def last_checkpoint(args, at=None):
    """(step, flat state) of the newest checkpoint whose shards were all
    written (or of the one of step `at`)."""
    steps = sorted(int(n[4:]) for n in os.listdir(args.dir)
                   if n.startswith("ckpt") and os.path.exists(os.path.join(args.dir, n, "complete")))
    if at is not None:
        steps = [s for s in steps if s == at]
    if not steps:
        raise RuntimeError(f"no complete checkpoint{'' if at is None else f' of step {at}'} in {args.dir}")
    d = os.path.join(args.dir, f"ckpt{steps[-1]:05d}")
    with open(os.path.join(d, "complete")) as f:
        world = int(f.read())
    return steps[-1], torch.cat([torch.load(os.path.join(d, f"shard{r}of{world}.pt")) for r in range(world)])


def train_steps(args, first, model, opt, rank, world, group, kill=None):
    """Steps first..args.steps-1 of the job, with checkpoints; kill(step)
    may end this process."""
    for step in range(first, args.steps):
        x, y = global_batch(step, args.global_batch)
        per = args.global_batch // world
        x, y = x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]
        if kill:
            kill(step)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()  # DDP all-reduces here: a lost rank fails it
        opt.step()
        if step % args.ckpt_every == 0:
            save_shard(args, step, rank, world, model.module, opt, group)


def who_is_left(args, rank, world, attempt):
    """The ranks that check in on the store within args.grace seconds."""
    store = dist.distributed_c10d._get_default_store()
    store.add(f"alive/{attempt}/{rank}", 1)
    deadline = time.monotonic() + args.grace
    while True:
        # add(key, 0) reads a counter without waiting (torch 1.13's
        # PrefixStore has no check()).
        alive = [r for r in range(world) if store.add(f"alive/{attempt}/{r}", 0) > 0]
        if len(alive) == world or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def resume(args, rank, world, group, at=None):
    """A model and optimizer loaded from the last checkpoint (or step `at`'s),
    in DDP over group."""
    step, flat = last_checkpoint(args, at)
    net = mlp(seed=0)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)
    load_flat(net, opt, flat)
    return step + 1, DDP(net, process_group=group), opt


def survivor(rank, world, args):
    dist.init_process_group("hoccl", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    net = mlp(seed=0)
    model = DDP(net)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr, momentum=0.9)

    def kill(step):
        if rank == args.kill_rank and step == args.kill_step:
            print(f"rank {rank}: killed at step {step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    try:
        train_steps(args, 0, model, opt, rank, world, None, kill)
        raise SystemExit(f"rank {rank}: the job ended without losing a rank")
    except RuntimeError as e:
        t0 = time.monotonic()
        sys.stdout.write(f"rank {rank}: a step failed: {str(e).splitlines()[0][:300]}\n")  # one write: one line
        sys.stdout.flush()
    alive = who_is_left(args, rank, world, 0)
    gone = [r for r in range(world) if r not in alive]
    del model
    group = hoccl_torch.shrink(gone)  # HOCCL_SHRINK_ABORT: the world group's work ends
    new_rank, new_world = group.rank(), group.size()
    first, model, opt = resume(args, new_rank, new_world, group)
    if new_rank == 0:
        with open(os.path.join(args.dir, "resumed"), "w") as f:
            f.write(f"{first - 1}\n")
        print(f"rank {rank}: ranks {gone} gone; {new_world} ranks go on from step {first} "
              f"({(time.monotonic() - t0) * 1e3:.0f} ms after the failure, {args.grace} s of it waiting "
              f"for check-ins)", flush=True)
    train_steps(args, first, model, opt, new_rank, new_world, group)
    if new_rank == 0:
        torch.save(flat_state(model.module, opt), os.path.join(args.dir, "final_shrunk.pt"))
    dist.barrier(group=group)
    dist.destroy_process_group()


def reference(rank, world, args):
    dist.init_process_group("hoccl", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    with open(os.path.join(args.dir, "resumed")) as f:
        at = int(f.read())
    first, model, opt = resume(args, rank, world, None, at)
    train_steps(args, first, model, opt, rank, world, None)
    if rank == 0:
        torch.save(flat_state(model.module, opt), os.path.join(args.dir, "final_reference.pt"))
    dist.destroy_process_group()


def entry(rank, world, args, port, fn):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if args.nodes > 1:  # emulated nodes: hoccl talks TCP between them
        os.environ["HOCCL_HOSTID"] = f"shrink-node{rank * args.nodes // world}"
    torch.set_num_threads(1)
    fn(rank, world, args)


def run(fn, world, args, expect):
    """fn on `world` processes; expect(rank) is the exit code rank must end with."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=entry, args=(r, world, args, port, fn)) for r in range(world)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(args.limit)
    bad = []
    for r, p in enumerate(procs):
        if p.exitcode is None:
            p.kill()
            p.join()
            bad.append(f"rank {r} still ran after {args.limit} s")
        elif p.exitcode != expect(r):
            bad.append(f"rank {r} ended with {p.exitcode}, not {expect(r)}")
    if bad:
        raise SystemExit(f"{fn.__name__} at {world} processes: " + "; ".join(bad))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", type=int, default=4)
    ap.add_argument("--kill-rank", type=int, default=3, help="the rank killed (not 0: it holds the store)")
    ap.add_argument("--kill-step", type=int, default=12)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--global-batch", type=int, default=48, help="samples per step, divisible by nproc and nproc-1")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--grace", type=float, default=2.0, help="seconds the survivors wait for each other's check-in")
    ap.add_argument("--limit", type=float, default=300, help="seconds a run may take")
    ap.add_argument("--nodes", type=int, default=1,
                    help="emulated nodes (HOCCL_HOSTID) the ranks are spread over, in rank order")
    ap.add_argument("--dir", default=None, help="checkpoint directory (default: a new temporary one)")
    args = ap.parse_args()
    if not 0 < args.kill_rank < args.nproc:
        ap.error(f"--kill-rank must lie in 1..{args.nproc - 1} (rank 0 holds the store)")
    if not 0 <= args.kill_step < args.steps:
        ap.error("--kill-step must lie in 0..steps-1")
    n = args.nproc
    if args.global_batch % n or args.global_batch % (n - 1):
        ap.error(f"--global-batch must be divisible by {n} and {n - 1}")
    if args.dir is None:
        import tempfile
        args.dir = tempfile.mkdtemp(prefix="hoccl-shrink-")
    os.makedirs(args.dir, exist_ok=True)
    t0 = time.monotonic()
    run(survivor, n, args, lambda r: -signal.SIGKILL if r == args.kill_rank else 0)
    t1 = time.monotonic()
    with open(os.path.join(args.dir, "resumed")) as f:
        resumed = int(f.read())
    run(reference, n - 1, args, lambda r: 0)
    shrunk = torch.load(os.path.join(args.dir, "final_shrunk.pt"))
    ref = torch.load(os.path.join(args.dir, "final_reference.pt"))
    diff = (shrunk - ref).abs().max().item()
    equal = bool(torch.equal(shrunk, ref))
    print(json.dumps({"equal": equal, "max_abs_diff": diff, "nproc": n, "killed_rank": args.kill_rank,
                      "killed_at_step": args.kill_step, "resumed_from_checkpoint": resumed, "steps": args.steps,
                      "values": shrunk.numel(), "job_s": round(t1 - t0, 2), "dir": args.dir}), flush=True)
    sys.exit(0 if equal else 1)


if __name__ == "__main__":
    main()
