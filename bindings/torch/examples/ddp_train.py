"""Trains a small MLP with DistributedDataParallel over hoccl (or gloo, to
compare) and prints the loss and the step time.

    /usr/bin/python3 ddp_train.py --nproc 4                 # starts 4 processes itself
    torchrun --nproc_per_node 4 --redirects 2 --tee 1 --log_dir logs/ddp ddp_train.py
                                                            # (torch 1.13 + Python 3.11 need the
                                                            #  --redirects/--tee/--log_dir workaround)

Each rank learns a fixed random "teacher" network from its own batches;
DDP averages the gradients, so every rank holds the same weights. With
--json the last line is {"backend", "nproc", "params", "step_ms", ...}.
--no-comm gives DDP a communication hook that returns each gradient bucket
as it is: the step without communication (the floor both backends share;
the ranks' weights then drift apart, so use it for timing only).
"""
import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

import hoccl_torch  # noqa: F401  (registers the "hoccl" backend)


def mlp(width, depth, seed):
    torch.manual_seed(seed)
    layers = [nn.Linear(64, width), nn.ReLU()]
    for _ in range(depth - 1):
        layers += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(width, 8))


def train(rank, world, args):
    torch.set_num_threads(args.threads)
    # On the emulated cluster (tests/cluster) each rank's namespace has one
    # interface for the network, which hoccl is told; gloo is told the same.
    ifname = os.environ.get("HOCCL_SOCKET_IFNAME", "").lstrip("=")
    if os.environ.get("HOCCL_CLUSTER") and ifname and "," not in ifname:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", ifname)
    dist.init_process_group(args.backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    teacher = mlp(32, 2, seed=1)
    model = DDP(mlp(args.width, args.depth, seed=0), bucket_cap_mb=args.bucket_mb)
    if args.no_comm:
        def keep_bucket(_state, bucket):
            done = torch.futures.Future()
            done.set_result(bucket.buffer())
            return done
        model.register_comm_hook(None, keep_bucket)
    elif args.sync_only:
        # The ranks meet once per bucket (a one-element all-reduce) but keep
        # their gradients: what waiting for each other costs, payload aside.
        def meet(_state, bucket):
            flag = torch.zeros(1)
            fut = dist.all_reduce(flag, async_op=True).get_future()
            buf = bucket.buffer()
            return fut.then(lambda _f: buf)
        model.register_comm_hook(None, meet)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    gen = torch.Generator().manual_seed(1234 + rank)

    def batch(_step):
        x = torch.randn(args.batch, 64, generator=gen)
        with torch.no_grad():
            return x, teacher(x)

    timed = timed_steps(args, rank, world, model, opt, batch)  # DDP all-reduces the buckets during backward
    report(args, rank, world, timed, sum(p.numel() for p in model.parameters()))
    # DDP's Reducer goes first, while the group is still registered: were it
    # the last holder of torch 1.13's ProcessGroupGloo, its destructor would
    # join gloo's worker thread holding the GIL while the worker waits for
    # the GIL to free a tensor (a deadlock seen in CI).
    del model, opt
    dist.destroy_process_group()


def timed_steps(args, rank, world, net, opt, batch):
    """args.warmup + args.steps steps of MSE training on batch(step) -> (x, y);
    returns the wall times of the steps after the warm-up and the CPU time
    this process (all its threads) spent in each (s). Rank 0 prints the loss
    every args.print_every steps."""
    times = []
    cpu = []
    for step in range(args.warmup + args.steps):
        x, y = batch(step)
        t0 = time.perf_counter()
        c0 = time.process_time()
        opt.zero_grad()
        loss = nn.functional.mse_loss(net(x), y)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        if step >= args.warmup:
            times.append(dt)
            cpu.append(time.process_time() - c0)
        if rank == 0 and (step % args.print_every == 0 or step == args.warmup + args.steps - 1):
            print(f"[{args.backend} x{world}] step {step:4d}  loss {loss.item():.5f}  step {dt * 1e3:7.2f} ms",
                  flush=True)
    return times, cpu


def report(args, rank, world, timed, params):
    """Rank 0 prints the job's step time, the slowest rank's mean (all ranks
    call it: it is an all-reduce), and with --json the result line, which
    also gives the CPU time per step summed over the ranks (cpu_ms: on
    oversubscribed cores, what the backend's threads cost the others)."""
    times, cpu = timed
    mean = torch.tensor([statistics.mean(times)], dtype=torch.float64)
    dist.all_reduce(mean, op=dist.ReduceOp.MAX)
    cpu_sum = torch.tensor([statistics.mean(cpu)], dtype=torch.float64)
    dist.all_reduce(cpu_sum)
    if rank != 0:
        return
    print(f"[{args.backend} x{world}] {params} parameters, {args.steps} steps: mean step "
          f"{mean.item() * 1e3:.2f} ms (slowest rank), median on rank 0 {statistics.median(times) * 1e3:.2f} ms",
          flush=True)
    if args.json:
        print(json.dumps({"backend": "none" if args.no_comm else args.backend, "nproc": world,
                          "params": params, "batch": args.batch, "steps": args.steps, "step_ms": mean.item() * 1e3,
                          "median_ms_rank0": statistics.median(times) * 1e3,
                          "cpu_ms": cpu_sum.item() * 1e3}), flush=True)


def spawned(rank, world, args, port, fn):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    fn(rank, world, args)


def start(fn, args):
    """fn(rank, world, args) on this rank under torchrun (env:// rendezvous),
    else on args.nproc processes started here."""
    if "RANK" in os.environ:
        fn(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(spawned, args=(args.nproc, args, port, fn), nprocs=args.nproc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", type=int, default=4, help="processes to start (ignored under torchrun)")
    ap.add_argument("--backend", default="hoccl", help="hoccl or gloo")
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--bucket-mb", type=float, default=25,
                    help="DDP's bucket_cap_mb (large: one all-reduce after backward)")
    ap.add_argument("--no-comm", action="store_true", help="no communication: the gradient buckets stay local")
    ap.add_argument("--sync-only", action="store_true",
                    help="the ranks meet once per bucket (a 4-byte all-reduce) but keep their gradients local")
    ap.add_argument("--print-every", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    start(train, ap.parse_args())


if __name__ == "__main__":
    main()
