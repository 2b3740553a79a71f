"""How long a group's collective takes right after another group's: 8
world all-gathers of one PaRO unit, timed call by call, after nothing,
after 8 rail reduce-scatters, after one, and after 8 followed by a pause.
NIG replays its world all-gather right after its rail reduce-scatter, and
on the emulated cluster that all-gather measured 2-3x ZeRO-1's identical
calls (results/20261128-paro-world-after-rail); this isolates it.

Run it like bindings/torch/examples/paro_bench.py, on nodes of more than
one rank, e.g.:

    tests/cluster/cluster.sh run --nodes 2 --node-gbit 1 --ranks-per-node 4 -- \\
        /usr/bin/python3 results/scripts/group_switch_probe.py

Rank 0 prints, per case, the median over the repetitions of each of the 8
calls and of their total (ms).
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
    ap.add_argument("--elems", type=int, default=615440, help="fp32 elements of one all-gather's output [615440]")
    ap.add_argument("--reps", type=int, default=7, help="repetitions of every case [7]")
    ap.add_argument("--pause", type=float, default=0.5, help="the pause after the rail calls, s [0.5]")
    ap.add_argument("--json", help="write the per-call medians here (rank 0)")
    args = ap.parse_args()
    dist.init_process_group("hoccl", timeout=datetime.timedelta(seconds=300))
    g = paro.ParoGroups(None)
    if g.nnodes < 2 or g.nlocal < 2:
        raise SystemExit(f"group_switch_probe: needs at least 2 nodes of 2 ranks (this job: {g.nnodes} x {g.nlocal})")
    elems = -(-args.elems // g.n) * g.n
    big, small = torch.zeros(elems), torch.zeros(elems // g.n)
    rbig = torch.zeros(elems // g.nlocal)
    rsmall = torch.zeros(rbig.numel() // g.nnodes)

    def rail_rs():
        dist.reduce_scatter_tensor(rsmall, rbig, group=g.pgs["rail"])

    cases = {"after nothing": (0, 0), "after 8 rail RS": (8, 0), "after 1 rail RS": (1, 0),
             f"after 8 rail RS, {args.pause:g} s pause": (8, args.pause)}
    times = {name: [] for name in cases}
    for _ in range(args.reps):
        for name, (rails, pause) in cases.items():
            dist.barrier(group=g.world)
            for _ in range(rails):
                rail_rs()
            if pause:
                time.sleep(pause)
            per_call = []
            for _ in range(8):
                t0 = time.perf_counter()
                dist.all_gather_into_tensor(big, small, group=g.world)
                per_call.append((time.perf_counter() - t0) * 1e3)
            times[name].append(per_call)
    if dist.get_rank() == 0:
        def med(xs):
            return sorted(xs)[len(xs) // 2]
        out = {}
        print(f"# {g.nnodes} nodes x {g.nlocal}; world all-gathers of {elems} fp32 elements; medians of {args.reps}")
        for name, reps in times.items():
            calls = [med([r[i] for r in reps]) for i in range(8)]
            total = med([sum(r) for r in reps])
            out[name] = {"calls_ms": calls, "total_ms": total}
            print(f"{name:32s} total {total:7.1f} ms; per call " + " ".join(f"{c:.1f}" for c in calls))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(out, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
