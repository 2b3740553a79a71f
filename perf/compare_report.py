#!/usr/bin/env python3
"""Tables and plots for perf/compare.sh and perf/compare-cluster.sh.

    compare_report.py DIR [DIR ...] [--plot FILE] [--expect-groups g1,g2,...]
    compare_report.py --select COLLECTIVE DIR

Each DIR holds one comparison (one machine, or one emulated cluster shape):
  runs.jsonl   one line per benchmark job, written by the script before the
               job starts: collective, round, position (in that round's
               order), group (contender), variant (its algorithm), transport,
               sweep ("small" or "large"), file (the driver's JSON lines,
               relative to DIR); "pilot": true for the selection round
  meta.json    title, ranks, the command line, anything else to print
  memcpy.json  optional: single-core memcpy bandwidth per size

For each collective, contender and size the value is the median over the
timed rounds of each (variant, placement) pair, then the best pair: the
lowest time for the small sizes (latency, us), the highest busbw for the
large ones (GB/s). The cell says which variant and which placement (ip: in
place, oop: out of place) gave it. Ratios are hoccl's speed-up: the peer's
time over hoccl's time (= hoccl's busbw over the peer's); above 1, hoccl is
faster.

--select reads the selection round of one collective and prints, as
"group:variant" words, each peer's algorithms that were the best of that
peer at one size or more (by the same rule as the tables); at most
--select-max (default 2) per peer, those that won the most sizes.

Exit status 1 when a result was wrong, a job left no rows or missed a size
that the other jobs of the same sweep have, or (--expect-groups) a contender
has no results; the tables are printed first.
"""
import argparse
import json
import os
import statistics
import sys
from collections import defaultdict

PLACEMENTS = ("oop", "ip")
GROUP_ORDER = ("hoccl", "gloo", "mpi-tuned", "mpi-forced", "mpi-han")
GROUP_LABEL = {
    "hoccl": "hoccl",
    "gloo": "Gloo (best algo)",
    "mpi-tuned": "Open MPI tuned",
    "mpi-forced": "Open MPI forced (best)",
    "mpi-han": "Open MPI han",
}


def group_key(g):
    return (GROUP_ORDER.index(g) if g in GROUP_ORDER else len(GROUP_ORDER), g)


def human(size):
    for unit in ("B", "K", "M", "G"):
        if size < 1024 or unit == "G":
            return f"{size:g}{unit}"
        size /= 1024
    return str(size)


class Comparison:
    """One DIR: what ran, in which order, and what it measured."""

    def __init__(self, d):
        self.dir = d
        self.problems = []
        meta_path = os.path.join(d, "meta.json")
        self.meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
        self.runs = []
        runs_path = os.path.join(d, "runs.jsonl")
        if not os.path.exists(runs_path):
            self.problems.append(f"{d}: no runs.jsonl (did the comparison run?)")
            return
        with open(runs_path) as f:
            self.runs = [json.loads(line) for line in f if line.strip()]
        # vals[coll][sweep][group][(variant, placement)][size] -> {"us": [...], "busbw": [...]}
        self.vals = defaultdict(lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(
            lambda: defaultdict(lambda: {"us": [], "busbw": []})))))
        self.pilot = defaultdict(lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(
            lambda: defaultdict(lambda: {"us": [], "busbw": []})))))
        self.transport = {}
        self.orders = defaultdict(dict)  # coll -> round -> [variant labels in order]
        sizes_of = defaultdict(set)  # (coll, sweep) -> sizes any job measured
        rows_of = {}  # run index -> sizes it measured
        for i, run in enumerate(self.runs):
            coll, sweep, group = run["collective"], run["sweep"], run["group"]
            self.transport[group] = run["transport"]
            label = f"{group}:{run['variant']}" if run["variant"] not in ("", group) else group
            order = self.orders[coll].setdefault(("pilot" if run.get("pilot") else run["round"]), [])
            if label not in order:
                order.append(label)
            path = os.path.join(d, run["file"])
            rows = []
            if os.path.exists(path):
                try:
                    with open(path) as f:
                        rows = [json.loads(line) for line in f if line.strip()]
                except ValueError as e:
                    self.problems.append(f"{d}: {run['file']}: not JSON lines ({e})")
                    rows = []
                # A size too small for one element per rank runs nothing (0 B).
                rows = [r for r in rows if r["size"] > 0]
            if not rows:
                self.problems.append(f"{d}: {coll} {sweep} round {run['round']} {label}: no results ({run['file']})")
            rows_of[i] = {r["size"] for r in rows}
            sizes_of[(coll, sweep)] |= rows_of[i]
            for r in rows:
                for p in PLACEMENTS:
                    if r[p] and r[p]["wrong"]:
                        self.problems.append(f"{d}: {coll} {label} size {r['size']} {p}: {r[p]['wrong']} wrong")
                target = self.pilot if run.get("pilot") else self.vals
                for p in PLACEMENTS:
                    if r[p] is None:  # not timed (mpi_perf --extra out_of_place)
                        continue
                    cell = target[coll][sweep][group][(run["variant"], p)][r["size"]]
                    cell["us"].append(r[p]["time_us"])
                    cell["busbw"].append(r[p]["busbw"])
        for i, run in enumerate(self.runs):
            missing = sizes_of[(run["collective"], run["sweep"])] - rows_of[i]
            if rows_of[i] and missing:
                self.problems.append(
                    f"{d}: {run['collective']} {run['group']}:{run['variant']} round {run['round']}: "
                    f"missing sizes {', '.join(human(s) for s in sorted(missing))}")
        self.memcpy = {}
        mpath = os.path.join(d, "memcpy.json")
        if os.path.exists(mpath):
            with open(mpath) as f:
                for line in f:
                    row = json.loads(line)
                    self.memcpy[row["size"]] = row["gbps"]

    def colls(self):
        return sorted(self.vals)

    def groups(self, coll):
        return sorted({g for sweep in self.vals[coll].values() for g in sweep}, key=group_key)

    def best(self, coll, sweep, group, pilot=False):
        """size -> (value, variant, placement): the best (variant, placement)
        pair by its median over rounds."""
        metric = "us" if sweep == "small" else "busbw"
        better = (lambda a, b: a < b) if metric == "us" else (lambda a, b: a > b)
        out = {}
        for (variant, p), by_size in (self.pilot if pilot else self.vals)[coll][sweep][group].items():
            for size, cell in by_size.items():
                v = statistics.median(cell[metric])
                if size not in out or better(v, out[size][0]):
                    out[size] = (v, variant, p)
        return out

    def rounds(self, coll):
        return len({r["round"] for r in self.runs if r["collective"] == coll and not r.get("pilot")})


def fmt(v, metric):
    if v is None:
        return "-"
    if metric == "us":
        return f"{v:.1f}" if v < 1000 else f"{v:.0f}"
    return f"{v:.3f}" if v < 10 else f"{v:.2f}"


def cell_text(entry, metric, group):
    if entry is None:
        return "-"
    v, variant, p = entry
    algo = "" if variant in ("", group, "auto") else f" {variant}"
    return f"{fmt(v, metric)} {p}{algo}"


def print_table(c, coll, sweep):
    groups = c.groups(coll)
    best = {g: c.best(coll, sweep, g) for g in groups}
    sizes = sorted({s for g in groups for s in best[g]})
    if not sizes:
        return
    metric = "us" if sweep == "small" else "busbw"
    what = "latency, us per call (lower is better)" if metric == "us" else "bus bandwidth, GB/s (higher is better)"
    print(f"\n{coll} - {what}; median over {c.rounds(coll)} rounds, best of in/out of place per contender")
    peers = [g for g in groups if g != "hoccl"]
    widths = {g: max(len(GROUP_LABEL.get(g, g)), max(len(cell_text(best[g].get(s), metric, g)) for s in sizes)) + 2
              for g in groups}
    head = f"{'size':>7}" + "".join(f"{GROUP_LABEL.get(g, g):>{widths[g]}}" for g in groups)
    ratio_heads = [f"hoccl vs {GROUP_LABEL.get(p, p).split(' (')[0]}" for p in peers if "hoccl" in groups]
    head += "".join(f"  {h:>{max(len(h), 6)}}" for h in ratio_heads)
    show_memcpy = metric == "busbw" and c.memcpy
    if show_memcpy:
        head += f"  {'memcpy 1 core':>13}"
    print(head)
    for s in sizes:
        line = f"{human(s):>7}" + "".join(f"{cell_text(best[g].get(s), metric, g):>{widths[g]}}" for g in groups)
        if "hoccl" in groups:
            h = best["hoccl"].get(s)
            for p, rh in zip(peers, ratio_heads):
                v = best[p].get(s)
                r = "-"
                if h and v and h[0] > 0 and v[0] > 0:
                    r = f"{(v[0] / h[0]) if metric == 'us' else (h[0] / v[0]):.2f}x"
                line += f"  {r:>{max(len(rh), 6)}}"
        if show_memcpy:
            m = c.memcpy.get(min(c.memcpy, key=lambda k: abs(k - s)))
            line += f"  {m:>13.2f}"
        print(line)


def print_header(c):
    print("\n" + "=" * 78)
    print(c.meta.get("title", c.dir))
    for k in ("ranks", "command", "runtime_s", "note"):
        if k in c.meta:
            print(f"{k}: {c.meta[k]}")
    print("transports: " + "; ".join(f"{GROUP_LABEL.get(g, g)}: {t}"
                                     for g, t in sorted(c.transport.items(), key=lambda x: group_key(x[0]))))


def print_orders(c, coll):
    orders = c.orders[coll]
    pilot = orders.get("pilot")
    if pilot:
        print(f"{coll} selection round (not in the tables): {', '.join(pilot)}")
    timed = sorted(k for k in orders if k != "pilot")
    for r in timed:
        print(f"{coll} round {r} order: {', '.join(orders[r])}")


def print_side_by_side(comps):
    """Several DIRs (the cluster shapes): each contender's best per size,
    shape next to shape, without the algorithm and placement notes."""
    colls = sorted({coll for c in comps for coll in c.colls()})
    print("\n" + "=" * 78)
    print("side by side: " + "; ".join(f"{c.meta.get('short', c.dir)} = {c.meta.get('title', '')}" for c in comps))
    for coll in colls:
        for sweep in ("small", "large"):
            metric = "us" if sweep == "small" else "busbw"
            cols = []  # (header, best dict)
            for c in comps:
                for g in c.groups(coll):
                    b = c.best(coll, sweep, g)
                    if b:
                        cols.append((f"{c.meta.get('short', '')} {GROUP_LABEL.get(g, g).split(' (')[0]}", b))
            if not cols:
                continue
            sizes = sorted({s for _, b in cols for s in b})
            print(f"\n{coll} - {'us per call' if metric == 'us' else 'busbw GB/s'}, both shapes")
            print(f"{'size':>7}" + "".join(f"  {h:>{max(len(h), 8)}}" for h, _ in cols))
            for s in sizes:
                print(f"{human(s):>7}" + "".join(f"  {fmt(b[s][0] if s in b else None, metric):>{max(len(h), 8)}}"
                                                 for h, b in cols))


def summary(c):
    out = {"title": c.meta.get("title", ""), "transports": c.transport, "collectives": {}}
    for coll in c.colls():
        out["collectives"][coll] = {
            "orders": {str(k): v for k, v in c.orders[coll].items()},
            "best": {sweep: {g: {str(s): {"value": v, "metric": "us" if sweep == "small" else "busbw",
                                          "variant": var, "placement": p}
                                 for s, (v, var, p) in c.best(coll, sweep, g).items()}
                             for g in c.groups(coll)}
                     for sweep in c.vals[coll]},
        }
    return out


def plot(comps, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot; Debian: python3-matplotlib)", file=sys.stderr)
        return
    colls = sorted({coll for c in comps for coll in c.colls()})
    fig, axes = plt.subplots(len(colls), 2 * len(comps), figsize=(4.2 * 2 * len(comps), 3.3 * len(colls)),
                             squeeze=False)
    for ci, c in enumerate(comps):
        for ri, coll in enumerate(colls):
            for k, sweep in enumerate(("small", "large")):
                ax = axes[ri][2 * ci + k]
                metric = "us" if sweep == "small" else "busbw"
                for g in c.groups(coll):
                    b = c.best(coll, sweep, g)
                    if not b:
                        continue
                    sizes = sorted(b)
                    ax.plot(sizes, [b[s][0] for s in sizes], marker="o", label=GROUP_LABEL.get(g, g),
                            linewidth=2.2 if g == "hoccl" else 1)
                if metric == "busbw" and c.memcpy and len(comps) == 1:
                    sizes = sorted(c.memcpy)
                    ax.plot(sizes, [c.memcpy[s] for s in sizes], linestyle="--", color="gray", label="memcpy, 1 core")
                ax.set_xscale("log", base=2)
                ax.set_yscale("log")
                ax.set_xlabel("message size (bytes)")
                ax.set_ylabel("us per call" if metric == "us" else "busbw (GB/s)")
                ax.set_title(f"{c.meta.get('short', '')} {coll} {'latency' if metric == 'us' else 'busbw'}".strip(),
                             fontsize=9)
                ax.grid(True, which="both", alpha=0.3)
                if ax.get_lines():
                    ax.legend(fontsize=7)
    fig.suptitle("best of in/out of place and of each contender's algorithms; median over rounds", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    print(f"plot: {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--plot", help="the PNG to write (default: DIR/compare.png of the first DIR)")
    ap.add_argument("--expect-groups", default="", help="comma-separated contenders that must have results")
    ap.add_argument("--select", metavar="COLLECTIVE")
    ap.add_argument("--select-max", type=int, default=2, help="--select: at most this many per peer (most sizes won)")
    args = ap.parse_args()
    if args.select:
        c = Comparison(args.dirs[0])
        wins = defaultdict(lambda: defaultdict(int))  # group -> variant -> sizes won
        for sweep, groups in c.pilot[args.select].items():
            for g in groups:
                for _, variant, _ in c.best(args.select, sweep, g, pilot=True).values():
                    wins[g][variant] += 1
        keep = set()
        for g, by_variant in wins.items():
            ranked = sorted(by_variant, key=lambda v: -by_variant[v])[:args.select_max]
            keep |= {f"{g}:{v}" for v in ranked}
        if not keep:
            print(f"no selection-round results for {args.select} in {args.dirs[0]}", file=sys.stderr)
            return 1
        print(" ".join(sorted(keep)))
        return 0
    comps = [Comparison(d) for d in args.dirs]
    problems = []
    for c in comps:
        problems += c.problems
        if not c.runs:
            continue
        print_header(c)
        for coll in c.colls():
            print()
            print_orders(c, coll)
            for sweep in ("small", "large"):
                print_table(c, coll, sweep)
            for g in filter(None, args.expect_groups.split(",")):
                if g not in c.groups(coll):
                    problems.append(f"{c.dir}: {coll}: no results from {g}")
        with open(os.path.join(c.dir, "summary.json"), "w") as f:
            json.dump(summary(c), f, indent=1)
    if len([c for c in comps if c.runs]) > 1:
        print_side_by_side([c for c in comps if c.runs])
    if any(c.runs for c in comps):
        plot([c for c in comps if c.runs], args.plot or os.path.join(comps[0].dir, "compare.png"))
    if problems:
        print("\nPROBLEMS:\n  " + "\n  ".join(problems))
        return 1
    print("\nall results checked: #wrong 0 everywhere, every job has every size")
    return 0


if __name__ == "__main__":
    sys.exit(main())
