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

(results/scripts/paro-measure.sh runs the two shapes of docs/paro.md.) Rank 0
prints a table and, with --json FILE, writes every number. The advice is
computed after the runs, from the model size, the machine options, Adam's
time per parameter and (--calibrate-intra) the intra-node probe; it sees
none of the strategies' measured times.
"""
import argparse
import datetime
import gc
import json
import math
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
    each waited for, `repeats` times; returns per repetition its seconds and
    per "group kind" class (e.g. "intra RS") the seconds of its calls, each
    call timed on its own."""
    bufs = []
    for _, group, kind, numel in trace:
        size = groups.sizes[group]
        big = torch.zeros(numel)
        small = torch.zeros(numel // size)
        bufs.append((group, kind, big, small))
    reps = []
    for _ in range(repeats):
        by_class = {}
        dist.barrier(group=groups.world)
        t0 = time.perf_counter()
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
        reps.append((time.perf_counter() - t0, by_class))
    return reps


def predicted_classes(advice_row):
    """The advisor's time per step of each "group kind" class (ms)."""
    out = {}
    for c in advice_row.get("calls", []):
        key = f"{c['group']} {c['kind']}"
        out[key] = out.get(key, 0.0) + c["per_step"] * c["ms_each"]
    return out


class IntraProbe:
    """Times all-gathers of one unit's elements on every node's group at
    once (the size of the strategies' intra-node calls), in blocks of
    `calls` calls, between the strategies' runs: on the emulated cluster
    every node shares the host's cores and memory, which the advisor must be
    told (hoccl-paro --intra-allgather), and on this host one measurement
    taken first was once 10x faster than the same calls in the strategies
    after it. The advisor gets the median block over the whole run."""

    def __init__(self, groups, elems, calls):
        self.groups, self.elems, self.calls = groups, elems, calls
        self.out, self.shard = torch.zeros(elems), torch.zeros(elems // groups.nlocal)
        self.per_call = []
        self.block()  # warm-up, not kept
        self.per_call.clear()

    def block(self):
        dist.barrier(group=self.groups.world)
        t0 = time.perf_counter()
        for _ in range(self.calls):
            dist.all_gather_into_tensor(self.out, self.shard, group=self.groups.intra)
        self.per_call.append((time.perf_counter() - t0) / self.calls)

    def median_ms(self):
        """The median block's time per call, the same on every rank (the slowest rank's)."""
        t = torch.tensor([sorted(self.per_call)[len(self.per_call) // 2] * 1e3])
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=self.groups.world)
        return t.item()


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
    ap.add_argument("--steps", type=int, default=3,
                    help="timed steps, each between barriers, and replays per strategy per round [3]")
    ap.add_argument("--warmup", type=int, default=1, help="untimed steps first [1]")
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds: each steps and replays every strategy, the order rotated by one per round; "
                         "each strategy reports its medians over all rounds [1]")
    ap.add_argument("--one-at-a-time", action="store_true",
                    help="hold one strategy's model at a time, built and warmed up again in every round, for models "
                         "too large to hold every strategy's at once (about 670 MB per rank at 5M parameters)")
    ap.add_argument("--advisor-args", default="", help="hoccl-paro machine options, e.g. \"--node-gbit 1\"")
    ap.add_argument("--calibrate-intra", action="store_true",
                    help="time an all-gather on every node at once, before each strategy's run, and have the "
                         "advisor fit its intra-node copy rates to the median (hoccl-paro --intra-allgather)")
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
    probe = None
    if args.calibrate_intra and groups.nlocal > 1:
        per_unit = -(-nparams // args.layers // groups.n) * groups.n
        probe = IntraProbe(groups, per_unit, args.layers)
        for _ in range(7):
            probe.block()
    adam_ns = None if args.no_optimizer_cost else optimizer_ns(nparams, groups)
    if adam_ns is not None:
        advisor_args += ["--optimizer-ns", f"{adam_ns:.4g}"]
    del model
    g = torch.Generator().manual_seed(rank)
    data = [(torch.randn(args.batch, width, generator=g), torch.randn(args.batch, width, generator=g))
            for _ in range(args.accum)]
    names = args.strategies.split(",")

    def build(name):
        """A model wrapped for `name`, warmed up; its trace is that of its last step."""
        net, _ = make_model(parse_count(args.params), args.layers)
        wrapped = paro.ParoDataParallel(net, lambda ps: torch.optim.Adam(ps, lr=1e-4), strategy=name,
                                        accumulation_steps=args.accum, group=groups, trace=True)
        for _ in range(args.warmup):
            train_step(wrapped)
        return wrapped

    def train_step(wrapped):
        wrapped.trace.clear()
        for x, y in data:
            nn.functional.mse_loss(wrapped(x), y).backward()
        wrapped.step()

    def timed_step(wrapped):
        """One step, between barriers: the slowest rank's time."""
        dist.barrier(group=groups.world)
        t0 = time.perf_counter()
        train_step(wrapped)
        dist.barrier(group=groups.world)
        return time.perf_counter() - t0

    # Every strategy's model lives through the whole run, so the rounds
    # interleave them step by step: each round runs --steps timed steps and
    # as many replays of every strategy, the order rotated by one per round.
    # On this host a slow spell lasts seconds and lengthens every step in
    # it, so one strategy's steps taken together (the runs before the
    # twelfth) let a spell decide which strategy stepped fastest.
    # --one-at-a-time keeps one model at a time instead (built and warmed
    # up again in every round), for models too large to hold them all.
    wrapped = {} if args.one_at_a_time else {name: build(name) for name in names}
    runs = {name: [] for name in names}
    states = {}
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            model = wrapped[name] if name in wrapped else build(name)
            if probe:
                probe.block()
            steps_s = [timed_step(model) for _ in range(args.steps)]
            trace = list(model.trace)
            states[name] = model.state_bytes()
            del model
            if args.one_at_a_time:
                gc.collect()
            reps = replay(trace, groups, args.steps)
            runs[name].append((steps_s, reps, trace))
            if rank == 0:
                comm = sorted(x[0] for x in reps)
                print(f"# round {r + 1}/{args.rounds}, {name}: comm {comm[len(comm) // 2] * 1e3:.1f} ms (median of "
                      f"{len(comm)}), step {sorted(steps_s)[len(steps_s) // 2] * 1e3:.1f} ms", flush=True)
    del wrapped
    gc.collect()
    # The advice takes the probe's median over the run; it sees none of
    # the strategies' own times.
    calibration = None
    if probe:
        ms = probe.median_ms()
        advisor_args += ["--intra-allgather", f"{probe.elems * 4}:{ms:.4g}"]
        calibration = {"allgather_elems": probe.elems, "allgather_ms": ms, "blocks": len(probe.per_call),
                       "rank0_blocks_ms": [x * 1e3 for x in probe.per_call]}
    advice = paro.advise(nparams, args.accum, torch.float32, args.layers, groups, advisor_args)
    predicted = {r["name"]: r for r in advice["strategies"]}
    if calibration:
        calibration.update(advice.get("intra_fit", {}))
    rows = []
    for name in names:
        per_round = runs[name]
        # The communication is the median of every replay of every round;
        # its classes are those of that replay, so they add up to it.
        reps = sorted((rep for x in per_round for rep in x[1]), key=lambda rep: rep[0])
        comm_s, class_s = reps[len(reps) // 2]
        trace, state = per_round[0][2], states[name]
        steps = sorted(t for x in per_round for t in x[0])
        step_s = steps[len(steps) // 2]
        # Rank 0's per-class times (each rank's add up to the same calls).
        pred = predicted[name]["comm_ms"]
        pred_classes = predicted_classes(predicted[name])
        rows.append({"strategy": name, "comm_ms": comm_s * 1e3, "predicted_comm_ms": pred,
                     "error": pred / (comm_s * 1e3) - 1, "step_ms": step_s * 1e3,
                     "step_range_ms": [steps[0] * 1e3, steps[-1] * 1e3], "state_bytes": state["total"],
                     "calls": len(trace), "elements": sum(t[3] for t in trace),
                     "rounds": [{"comm_ms": sorted(rep[0] for rep in x[1])[len(x[1]) // 2] * 1e3,
                                 "replays_ms": [rep[0] * 1e3 for rep in x[1]], "steps_ms": [t * 1e3 for t in x[0]]}
                                for x in per_round],
                     "classes": {k: {"measured_ms": v * 1e3, "predicted_ms": pred_classes.get(k)}
                                 for k, v in sorted(class_s.items())}})
    if rank == 0:
        fits = [r for r in rows if predicted[r["strategy"]]["fits"]]
        fastest = min(fits, key=lambda r: r["step_ms"])["strategy"] if fits else None
        print(f"# {dist.get_world_size()} ranks: {groups.nnodes} nodes x {groups.nlocal}; {nparams} parameters "
              f"(fp32, {args.layers} layers of {width}); {args.accum} micro-steps of {args.batch} samples per "
              f"step; {args.warmup} untimed step(s), then {args.rounds} round(s) of {args.steps} timed step(s) and "
              f"replay(s) of every strategy, interleaved{', one model at a time' if args.one_at_a_time else ''}; "
              f"medians; advisor: {advice['machine']}")
        if adam_ns is not None:
            print(f"# optimizer: Adam took {adam_ns:.3g} ns per parameter on rank 0; the advisor was given "
                  f"--optimizer-ns {adam_ns:.4g} and ranks strategies by communication plus that update")
        if calibration:
            blocks = calibration["rank0_blocks_ms"]
            print(f"# intra-node calibration: all-gather of {calibration['allgather_elems']} fp32 elements on every "
                  f"node at once, {calibration['blocks']} blocks between the runs (rank 0: "
                  f"{min(blocks):.2f}-{max(blocks):.2f} ms), median {calibration['allgather_ms']:.2f} ms; the "
                  f"advisor's intra-node rates fitted to it: {calibration.get('shm_gbps', 0):.4g} Gbit/s per rank, "
                  f"node memory {calibration.get('node_mem_gbps', 0):.4g}" +
                  (f"; WARNING: {calibration['warning']}" if calibration.get("warning") else ""))
        print("| strategy | comm/step measured (ms: median replay; range) | predicted (ms) | error "
              "| predicted optimizer (ms) | step (ms: median; range) | state/rank (MB) |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            optim = predicted[r["strategy"]].get("optimizer_ms", 0.0)
            spread = [ms for x in r["rounds"] for ms in x["replays_ms"]]
            comm = f"{r['comm_ms']:.1f}" + (f" ({min(spread):.1f}-{max(spread):.1f})" if len(spread) > 1 else "")
            print(f"| {r['strategy']} | {comm} | {r['predicted_comm_ms']:.1f} | {100 * r['error']:+.0f}% "
                  f"| {optim:.1f} | {r['step_ms']:.1f} ({r['step_range_ms'][0]:.0f}-{r['step_range_ms'][1]:.0f}) "
                  f"| {r['state_bytes'] / 1e6:.1f} |")
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
                           "units": args.layers, "rounds": args.rounds, "one_at_a_time": args.one_at_a_time, "advisor_args": advisor_args, "advice": advice,
                           "calibration": calibration, "optimizer_ns": adam_ns, "rows": rows,
                           "measured_fastest": fastest}, f, indent=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
