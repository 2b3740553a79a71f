"""PaRO strategies side by side in one run: per strategy, the measured
communication time per optimizer step (the strategy's collectives replayed
alone, in order, on the same groups), the step time of real training
(forward, backward, optimizer), the training state per rank, and
hoccl-paro's predicted communication time.

Run it like any torch.distributed job (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT; HOCCL_HOSTID or the topology tells hoccl the nodes), e.g. on
the emulated cluster:

    tests/cluster/cluster.sh run --nodes 2 --node-gbit 1 --ranks-per-node 4 -- \\
        /usr/bin/python3 bindings/torch/examples/paro_bench.py --params 5M --accum 4 \\
        --advisor-args "--node-gbit 1 --oversubscription 4"

(tools/paro-measure.sh runs the two shapes of docs/paro.md.) Rank 0
prints a table and, with --json FILE, writes every number.
"""
import argparse
import datetime
import gc
import json
import math
import os
import shlex
import time

import torch
import torch.distributed as dist
import torch.nn as nn

import hoccl_torch  # noqa: F401  (registers the backend)
from hoccl_torch import paro


def parse_count(text):
    mult = {"K": 1e3, "M": 1e6, "G": 1e9}.get(text[-1:].upper(), 1)
    return int(float(text[:-1] if mult != 1 else text) * mult)


def make_model(params, layers):
    """An MLP of `layers` square Linear layers with about `params` parameters."""
    width = max(16, int(math.sqrt(params / layers)) // 16 * 16)
    torch.manual_seed(0)
    mods = []
    for i in range(layers):
        mods.append(nn.Linear(width, width))
        if i + 1 < layers:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods), width


def replay(trace, groups, repeats):
    """Issues the recorded collectives (phase, group, kind, numel) again,
    each waited for, `repeats` times; returns seconds per repetition, and
    per "group kind" class (e.g. "intra RS") its seconds per repetition,
    each call timed on its own."""
    bufs = []
    for _, group, kind, numel in trace:
        size = groups.sizes[group]
        big = torch.zeros(numel)
        small = torch.zeros(numel // size)
        bufs.append((group, kind, big, small))
    by_class = {}
    dist.barrier(group=groups.world)
    t0 = time.perf_counter()
    for _ in range(repeats):
        for group, kind, big, small in bufs:
            pg = groups.pgs[group]
            c0 = time.perf_counter()
            if kind == "AG":
                dist.all_gather_into_tensor(big, small, group=pg)
            elif kind == "RS":
                dist.reduce_scatter_tensor(small, big, group=pg)
            else:
                dist.all_reduce(big, group=pg)
            key = f"{group} {kind}"
            by_class[key] = by_class.get(key, 0.0) + time.perf_counter() - c0
    dist.barrier(group=groups.world)
    return (time.perf_counter() - t0) / repeats, {k: v / repeats for k, v in by_class.items()}


def predicted_classes(advice_row):
    """The advisor's time per step of each "group kind" class (ms)."""
    out = {}
    for c in advice_row.get("calls", []):
        key = f"{c['group']} {c['kind']}"
        out[key] = out.get(key, 0.0) + c["per_step"] * c["ms_each"]
    return out


def sim_allgather_ms(sim, advisor_args, per_node, nbytes, node_mem_gbps):
    """hoccl-sim's closed-form time of the all-gather the tuner picks, on one
    node of `per_node` ranks with the given node memory rate."""
    import subprocess
    out = subprocess.run([sim] + advisor_args + ["--nodes", "1", "--ranks-per-node", str(per_node),
                                                 "--node-mem-gbps", str(node_mem_gbps), "--coll", "allgather",
                                                 "-b", str(nbytes), "-e", str(nbytes), "--engine", "model", "--csv"],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split(",")
        if len(f) == 7 and f[0] == "AllGather" and f[3] == f[6]:
            return float(f[4])
    raise RuntimeError(f"hoccl-sim printed no prediction for the chosen all-gather:\n{out}")


def calibrate_intra(groups, elems, calls, advisor_args, blocks=7):
    """Measures `calls` all-gathers of `elems` fp32 elements on every node's
    group at once (as the strategies run them) and returns (seconds per
    call, the node memory rate in Gbit/s at which the model predicts that
    time, a warning when the fit stopped at a bound of its range or ""):
    on the emulated cluster every node shares the host's cores and
    memory, which the advisor must be told. The time is the median of
    `blocks` blocks of `calls` calls after one block of warm-up: one block's
    mean moved the fitted rate by 25% between runs."""
    import os
    out, shard = torch.zeros(elems), torch.zeros(elems // groups.nlocal)
    per_call = []
    for b in range(blocks + 1):
        dist.barrier(group=groups.world)
        t0 = time.perf_counter()
        for _ in range(calls):
            dist.all_gather_into_tensor(out, shard, group=groups.intra)
        if b > 0:  # block 0 warms up
            per_call.append((time.perf_counter() - t0) / calls)
    t = torch.tensor([sorted(per_call)[len(per_call) // 2]])
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=groups.world)  # every rank fits the same number
    want_ms = t.item() * 1e3
    sim = os.path.join(os.path.dirname(paro._find_advisor()), "hoccl-sim")
    lo, hi = LOWEST_GBPS, HIGHEST_GBPS  # the predicted time falls as the rate rises
    for _ in range(30):
        mid = math.sqrt(lo * hi)
        if sim_allgather_ms(sim, advisor_args, groups.nlocal, elems * 4, mid) > want_ms:
            lo = mid
        else:
            hi = mid
    gbps = math.sqrt(lo * hi)
    warning = ""
    if gbps > HIGHEST_GBPS / 1.01:
        best_ms = sim_allgather_ms(sim, advisor_args, groups.nlocal, elems * 4, HIGHEST_GBPS)
        warning = (f"the fit stopped at its upper bound: the model predicts {best_ms:.2f} ms for this all-gather at "
                   "any memory rate, so it prices intra-node memory at nothing and its intra-node predictions "
                   "will be low")
    elif gbps < LOWEST_GBPS * 1.01:
        warning = "the fit stopped at its lower bound: intra-node predictions will be high"
    return t.item(), gbps, warning


LOWEST_GBPS, HIGHEST_GBPS = 0.1, 10000.0  # the calibration's range


def optimizer_ns(nparams, groups, repeats=5):
    """Adam's step time per parameter on this machine, in ns: rank 0 times
    steps over a flat tensor of the model's size and every rank gets its
    number (the advice must be the same on every rank)."""
    value = torch.zeros(1, dtype=torch.float64)
    if dist.get_rank() == 0:
        p = torch.nn.Parameter(torch.zeros(nparams))
        p.grad = torch.randn(nparams)
        opt = torch.optim.Adam([p], lr=1e-4)
        opt.step()  # creates the state
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - t0)
        value[0] = sorted(times)[len(times) // 2] / nparams * 1e9
    dist.broadcast(value, 0, group=groups.world)
    return float(value[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--strategies", default=",".join(paro.STRATEGIES), help="comma-separated [all]")
    ap.add_argument("--params", default="5M", help="model size (an MLP), e.g. 5M [5M]")
    ap.add_argument("--layers", type=int, default=8, help="Linear layers (one unit each) [8]")
    ap.add_argument("--batch", type=int, default=8, help="samples per rank per micro-step [8]")
    ap.add_argument("--accum", type=int, default=4, help="micro-steps per optimizer step [4]")
    ap.add_argument("--steps", type=int, default=3, help="timed steps (and replays) per strategy [3]")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first [1]")
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds: each trains and replays every strategy, the order rotated by one per round; "
                         "each strategy reports its medians [1]")
    ap.add_argument("--advisor-args", default="", help="hoccl-paro machine options, e.g. \"--node-gbit 1\"")
    ap.add_argument("--calibrate-intra", action="store_true",
                    help="measure the nodes' all-gather rate first and give the advisor the node memory rate "
                         "that predicts it (--node-mem-gbps)")
    ap.add_argument("--no-optimizer-cost", action="store_true",
                    help="do not time Adam and give the advisor --optimizer-ns (it then costs communication only)")
    ap.add_argument("--timeout", type=float, default=900, help="the process group's timeout, s [900]")
    ap.add_argument("--json", help="write the results here (rank 0)")
    args = ap.parse_args()
    if args.rounds < 1 or args.steps < 1:
        ap.error("--rounds and --steps must be at least 1")

    dist.init_process_group("hoccl", timeout=datetime.timedelta(seconds=args.timeout))
    rank = dist.get_rank()
    groups = paro.ParoGroups(None)
    model, width = make_model(parse_count(args.params), args.layers)
    nparams = sum(p.numel() for p in model.parameters())
    advisor_args = shlex.split(args.advisor_args)
    calibration = None
    if args.calibrate_intra and groups.nlocal > 1:
        per_unit = -(-nparams // args.layers // groups.n) * groups.n
        seconds, gbps, warning = calibrate_intra(groups, per_unit, args.layers, advisor_args)
        calibration = {"allgather_elems": per_unit, "allgather_ms": seconds * 1e3, "node_mem_gbps": gbps,
                       "warning": warning}
        advisor_args += ["--node-mem-gbps", f"{gbps:.4g}"]
    adam_ns = None if args.no_optimizer_cost else optimizer_ns(nparams, groups)
    if adam_ns is not None:
        advisor_args += ["--optimizer-ns", f"{adam_ns:.4g}"]
    advice = paro.advise(nparams, args.accum, torch.float32, args.layers, groups, advisor_args)
    predicted = {r["name"]: r for r in advice["strategies"]}
    del model
    g = torch.Generator().manual_seed(rank)
    data = [(torch.randn(args.batch, width, generator=g), torch.randn(args.batch, width, generator=g))
            for _ in range(args.accum)]
    names = args.strategies.split(",")

    def run(name):
        """Trains `name` for the timed steps, then replays its calls: (step
        seconds, communication seconds, per-class seconds, trace, state)."""
        net, _ = make_model(parse_count(args.params), args.layers)
        wrapped = paro.ParoDataParallel(net, lambda ps: torch.optim.Adam(ps, lr=1e-4), strategy=name,
                                        accumulation_steps=args.accum, group=groups, trace=True)

        def step():
            wrapped.trace.clear()
            for x, y in data:
                nn.functional.mse_loss(wrapped(x), y).backward()
            wrapped.step()

        for _ in range(args.warmup):
            step()
        dist.barrier(group=groups.world)
        t0 = time.perf_counter()
        for _ in range(args.steps):
            step()
        dist.barrier(group=groups.world)
        step_s = (time.perf_counter() - t0) / args.steps
        trace = list(wrapped.trace)
        state = wrapped.state_bytes()
        del wrapped, net
        gc.collect()
        comm_s, class_s = replay(trace, groups, args.steps)
        return step_s, comm_s, class_s, trace, state

    # Every round runs each strategy once, the order rotated by one per
    # round, so that a slow spell of this machine falls on different
    # strategies; each strategy's numbers are its medians over the rounds.
    runs = {name: [] for name in names}
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            step_s, comm_s, class_s, trace, state = run(name)
            runs[name].append((step_s, comm_s, class_s, trace, state))
            if rank == 0:
                print(f"# round {r + 1}/{args.rounds}, {name}: comm {comm_s * 1e3:.1f} ms (predicted "
                      f"{predicted[name]['comm_ms']:.1f}), step {step_s * 1e3:.1f} ms", flush=True)
    rows = []
    for name in names:
        per_round = runs[name]
        mid = sorted(range(len(per_round)), key=lambda i: per_round[i][1])[len(per_round) // 2]
        _, comm_s, class_s, trace, state = per_round[mid]  # the classes of the median round add up to its total
        step_s = sorted(x[0] for x in per_round)[len(per_round) // 2]
        # Rank 0's per-class times (each rank's add up to the same calls).
        pred = predicted[name]["comm_ms"]
        pred_classes = predicted_classes(predicted[name])
        rows.append({"strategy": name, "comm_ms": comm_s * 1e3, "predicted_comm_ms": pred,
                     "error": pred / (comm_s * 1e3) - 1, "step_ms": step_s * 1e3, "state_bytes": state["total"],
                     "calls": len(trace), "elements": sum(t[3] for t in trace),
                     "rounds": [{"comm_ms": x[1] * 1e3, "step_ms": x[0] * 1e3} for x in per_round],
                     "classes": {k: {"measured_ms": v * 1e3, "predicted_ms": pred_classes.get(k)}
                                 for k, v in sorted(class_s.items())}})
    if rank == 0:
        fits = [r for r in rows if predicted[r["strategy"]]["fits"]]
        fastest = min(fits, key=lambda r: r["step_ms"])["strategy"] if fits else None
        print(f"# {dist.get_world_size()} ranks: {groups.nnodes} nodes x {groups.nlocal}; {nparams} parameters "
              f"(fp32, {args.layers} layers of {width}); {args.accum} micro-steps of {args.batch} samples per "
              f"step; {args.steps} timed steps after {args.warmup}, {args.rounds} round(s), medians; "
              f"advisor: {advice['machine']}")
        if adam_ns is not None:
            print(f"# optimizer: Adam took {adam_ns:.3g} ns per parameter on rank 0; the advisor was given "
                  f"--optimizer-ns {adam_ns:.4g} and ranks strategies by communication plus that update")
        if calibration:
            print(f"# intra-node calibration: all-gather of {calibration['allgather_elems']} fp32 elements on every "
                  f"node at once took {calibration['allgather_ms']:.2f} ms; the advisor was given "
                  f"--node-mem-gbps {calibration['node_mem_gbps']:.4g}" +
                  (f"; WARNING: {calibration['warning']}" if calibration["warning"] else ""))
        print("| strategy | comm/step measured (ms; range over rounds) | predicted (ms) | error "
              "| predicted optimizer (ms) | step (ms) | state/rank (MB) |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            optim = predicted[r["strategy"]].get("optimizer_ms", 0.0)
            spread = [x["comm_ms"] for x in r["rounds"]]
            comm = f"{r['comm_ms']:.1f}" + (f" ({min(spread):.1f}-{max(spread):.1f})" if len(spread) > 1 else "")
            print(f"| {r['strategy']} | {comm} | {r['predicted_comm_ms']:.1f} | {100 * r['error']:+.0f}% "
                  f"| {optim:.1f} | {r['step_ms']:.1f} | {r['state_bytes'] / 1e6:.1f} |")
        print(f"recommended: {advice['recommended']}; measured fastest step: {fastest}")
        print("per class of call (rank 0's time in the calls, per step): measured / predicted ms")
        for r in rows:
            cells = []
            for k, v in r["classes"].items():
                p = v["predicted_ms"]
                cells.append(f"{k} {v['measured_ms']:.1f} / " + (f"{p:.1f} ({p / v['measured_ms'] - 1:+.0%})"
                                                               if p is not None else "not predicted"))
            print(f"#   {r['strategy']}: " + "; ".join(cells))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"shape": [groups.nnodes, groups.nlocal], "params": nparams, "accum": args.accum,
                           "units": args.layers, "rounds": args.rounds, "advisor_args": advisor_args, "advice": advice,
                           "calibration": calibration, "optimizer_ns": adam_ns, "rows": rows,
                           "measured_fastest": fastest}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
