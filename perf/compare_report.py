#!/usr/bin/env python3
"""Turns the JSON lines written by perf/compare.sh into one table per
collective (bus bandwidth of each contender, ratios of hoccl to each peer,
single-core memcpy bandwidth) and one PNG plot per collective.

    compare_report.py OUT_DIR [--np N]

Files are named <contender>.<collective>.<round>.json; each size's value is
the median over rounds of the out-of-place busbw.
"""
import argparse
import glob
import json
import os
import statistics
import sys
from collections import defaultdict


def load(out_dir):
    # data[coll][contender][size] -> list of busbw over rounds
    data = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    wrong = []
    for path in sorted(glob.glob(os.path.join(out_dir, "*.*.*.json"))):
        contender, coll, _round, _ = os.path.basename(path).split(".")
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                data[coll][contender][row["size"]].append(row["oop"]["busbw"])
                for place in ("oop", "ip"):
                    if row[place]["wrong"]:
                        wrong.append(f"{contender} {coll} size {row['size']} {place}: {row[place]['wrong']} wrong")
    memcpy = {}
    mpath = os.path.join(out_dir, "memcpy.json")
    if os.path.exists(mpath):
        with open(mpath) as f:
            for line in f:
                row = json.loads(line)
                memcpy[row["size"]] = row["gbps"]
    return data, memcpy, wrong


def nearest(table, size):
    if not table:
        return None
    key = min(table, key=lambda s: abs(s - size))
    return table[key]


def human(size):
    for unit in ("B", "K", "M", "G"):
        if size < 1024 or unit == "G":
            return f"{size:.0f}{unit}" if size == int(size) else f"{size:.1f}{unit}"
        size /= 1024
    return str(size)


def report(data, memcpy, nranks, out_dir):
    peers_order = lambda c: (c != "hoccl", c)
    for coll in sorted(data):
        contenders = sorted(data[coll], key=peers_order)
        peers = [c for c in contenders if c != "hoccl"]
        sizes = sorted({s for c in contenders for s in data[coll][c]})
        med = {c: {s: statistics.median(v) for s, v in data[coll][c].items()} for c in contenders}
        print(f"\n{coll}, {nranks} ranks: out-of-place bus bandwidth (GB/s), median over rounds")
        head = f"{'size':>8}" + "".join(f" {c:>21}" for c in contenders)
        head += "".join(f" {'hoccl/' + p:>23}" for p in peers) + f" {'memcpy(1 core)':>15}"
        print(head)
        for s in sizes:
            line = f"{human(s):>8}"
            for c in contenders:
                v = med[c].get(s)
                line += f"{v:>22.3f}" if v is not None else f"{'-':>22}"
            h = med.get("hoccl", {}).get(s)
            for p in peers:
                v = med[p].get(s)
                line += f"{h / v:>24.2f}" if h and v else f"{'-':>24}"
            m = nearest(memcpy, s)
            line += f"{m:>16.2f}" if m else f"{'-':>16}"
            print(line)
        plot(coll, contenders, med, memcpy, nranks, out_dir)


def plot(coll, contenders, med, memcpy, nranks, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not installed: no plot; Debian: python3-matplotlib)", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for c in contenders:
        sizes = sorted(med[c])
        ax.plot(sizes, [med[c][s] for s in sizes], marker="o", label=c, linewidth=2 if c == "hoccl" else 1)
    if memcpy:
        sizes = sorted(memcpy)
        ax.plot(sizes, [memcpy[s] for s in sizes], linestyle="--", color="gray", label="memcpy, 1 core")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")  # memcpy (in cache) and small-message rates span decades
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(f"{coll}, {nranks} ranks on this machine (median over rounds)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    path = os.path.join(out_dir, f"{coll}.png")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"plot: {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--np", type=int, default=0)
    args = ap.parse_args()
    data, memcpy, wrong = load(args.out_dir)
    if not data:
        print(f"no results in {args.out_dir}", file=sys.stderr)
        return 1
    report(data, memcpy, args.np, args.out_dir)
    if wrong:
        print("\nWRONG RESULTS:\n  " + "\n  ".join(wrong))
        return 1
    print("\nall results checked: #wrong 0 everywhere")
    return 0


if __name__ == "__main__":
    sys.exit(main())
