"""Trains a small MLP with tensor parallelism (torch 2.x: DeviceMesh and
parallelize_module) over hoccl (or gloo, to compare) and prints the loss
and the step time.

    /usr/bin/python3 tp_train.py --nproc 4        # starts 4 processes itself (or run it under torchrun)

Each block is Linear(width, hidden) split by columns and Linear(hidden,
width) split by rows (ColwiseParallel, RowwiseParallel), so every block
all-reduces a (batch, width) activation in forward and its gradient in
backward. Every rank feeds the same batch, as tensor parallelism needs.
With --json the last line is {"backend", "nproc", "params", "step_ms", ...}.
--no-comm runs each rank's shard of the same blocks (hidden / nproc wide)
as a plain module with no collectives: the step without communication
(the floor both backends share; for timing only).
"""
import argparse
import datetime
import os

import torch
import torch.distributed as dist
import torch.nn as nn

import hoccl_torch  # noqa: F401  (registers the "hoccl" backend)
from ddp_train import report, start, timed_steps  # the DDP example's loop, launch and result line


class Block(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.up = nn.Linear(width, hidden)
        self.down = nn.Linear(hidden, width)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


def model(width, hidden, depth, seed):
    torch.manual_seed(seed)
    return nn.Sequential(*[Block(width, hidden) for _ in range(depth)])


def train(rank, world, args):
    torch.set_num_threads(args.threads)
    ifname = os.environ.get("HOCCL_SOCKET_IFNAME", "").lstrip("=")
    if os.environ.get("HOCCL_CLUSTER") and ifname and "," not in ifname:
        os.environ.setdefault("GLOO_SOCKET_IFNAME", ifname)
    dist.init_process_group(args.backend, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
    if args.hidden % world:
        raise SystemExit(f"tp_train: --hidden {args.hidden} must be a multiple of the {world} processes")
    if args.no_comm:
        net = model(args.width, args.hidden // world, args.depth, seed=0)  # this rank's shard, alone
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
        mesh = init_device_mesh("cpu", (world,))
        net = model(args.width, args.hidden, args.depth, seed=0)
        plan = {}
        for i in range(args.depth):
            plan[f"{i}.up"] = ColwiseParallel()
            plan[f"{i}.down"] = RowwiseParallel()
        parallelize_module(net, mesh, plan)
    opt = torch.optim.SGD(net.parameters(), lr=args.lr)
    gen = torch.Generator().manual_seed(1234)  # the same batches on every rank
    timed = timed_steps(args, rank, world, net, opt,
                        lambda _step: (torch.randn(args.batch, args.width, generator=gen),
                                       torch.randn(args.batch, args.width, generator=gen)))
    report(args, rank, world, timed, sum(p.numel() for p in model(args.width, args.hidden, args.depth, 0).parameters()))
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", type=int, default=4, help="processes to start (ignored under torchrun)")
    ap.add_argument("--backend", default="hoccl", help="hoccl or gloo")
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--batch", type=int, default=32, help="rows per batch (the same on every rank)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--no-comm", action="store_true", help="each rank's shard alone, no collectives")
    ap.add_argument("--print-every", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not hoccl_torch.TORCH2:
        raise SystemExit(f"tp_train: tensor parallelism needs torch 2.x (DeviceMesh); this is {torch.__version__}")
    start(train, args)


if __name__ == "__main__":
    main()
