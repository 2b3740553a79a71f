"""The calls of PaRO's groups, timed alone: blocks of 8 identical calls on
the world group (one unit) and on the rail group (a unit's node shard: the
same bytes per node on the links), interleaved block by block, each the
slowest rank's time. results/20261129-spin-count-parent
compares the rail calls with the world ones that move the same bytes.

Run it like bindings/torch/examples/paro_bench.py, on nodes of more than
one rank, e.g.:

    tests/cluster/cluster.sh run --nodes 2 --node-gbit 1 --ranks-per-node 4 -- \\
        /usr/bin/python3 results/scripts/group_calls_probe.py

Rank 0 prints per case the median time per call over the blocks, and
their range (ms).
"""
import argparse
import datetime
import json
import time

import torch
import torch.distributed as dist

import hoccl_torch  # noqa: F401  (registers the backend)
from hoccl_torch import paro


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--elems", type=int, default=615440, help="fp32 elements of one unit [615440]")
    ap.add_argument("--blocks", type=int, default=5, help="timed blocks of every case, after one untimed [5]")
    ap.add_argument("--json", help="write the per-case times here (rank 0)")
    args = ap.parse_args()
    dist.init_process_group("hoccl", timeout=datetime.timedelta(seconds=300))
    g = paro.ParoGroups(None)
    if g.nnodes < 2 or g.nlocal < 2:
        raise SystemExit(f"group_calls_probe: needs at least 2 nodes of 2 ranks (this job: {g.nnodes} x {g.nlocal})")
    elems = -(-args.elems // g.n) * g.n
    unit, unit_part = torch.zeros(elems), torch.zeros(elems // g.n)
    shard, shard_part = torch.zeros(elems // g.nlocal), torch.zeros(elems // g.n)
    rail = g.pgs["rail"]
    cases = {
        "world all-reduce (unit)": lambda: dist.all_reduce(unit, group=g.world),
        "world reduce-scatter (unit)": lambda: dist.reduce_scatter_tensor(unit_part, unit, group=g.world),
        "rail all-reduce (shard)": lambda: dist.all_reduce(shard, group=rail),
        "rail reduce-scatter (shard)": lambda: dist.reduce_scatter_tensor(shard_part, shard, group=rail),
        "rail all-gather (shard)": lambda: dist.all_gather_into_tensor(shard, shard_part, group=rail),
    }
    times = {name: [] for name in cases}
    for block in range(args.blocks + 1):
        for name, call in cases.items():
            dist.barrier(group=g.world)
            t0 = time.perf_counter()
            for _ in range(8):
                call()
            t = torch.tensor([(time.perf_counter() - t0) / 8 * 1e3])
            dist.all_reduce(t, op=dist.ReduceOp.MAX, group=g.world)
            if block:
                times[name].append(t.item())
    if dist.get_rank() == 0:
        out = {}
        print(f"# {g.nnodes} nodes x {g.nlocal}; a unit of {elems} fp32 elements, its node shard "
              f"{elems // g.nlocal}; median of {args.blocks} blocks of 8 calls")
        for name, ts in times.items():
            ts = sorted(ts)
            out[name] = {"median_ms": ts[len(ts) // 2], "blocks_ms": ts}
            print(f"{name:30s} {ts[len(ts) // 2]:8.2f} ms per call ({ts[0]:.2f}-{ts[-1]:.2f})")
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
