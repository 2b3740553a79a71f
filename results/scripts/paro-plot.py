#!/usr/bin/env python3
"""Plots PaRO measurements: per shape, each strategy's communication per
step (measured median with its range, and hoccl-paro's prediction), its
step time (median with its range; the recommended strategy drawn dark)
and its training state per rank.

    results/scripts/paro-plot.py RUN.json... [-o OUT.png]

Each RUN.json is what paro_bench.py --json wrote (results/scripts/paro-measure.sh
writes OUT/paro-a.json and OUT/paro-b.json and calls this). Without -o the
plot goes beside the first file, as paro.png. Exits 1 if a file is not
such a run; without matplotlib (Debian: python3-matplotlib) it says so and
writes nothing.
"""
import argparse
import json
import os
import sys


def load(path):
    """(title, rows, recommended) from a run file, or raises ValueError naming the problem."""
    try:
        with open(path) as f:
            run = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: cannot read it as JSON ({e})")
    if not isinstance(run, dict) or not isinstance(run.get("rows"), list) or not run["rows"]:
        raise ValueError(f"{path}: no \"rows\": not a paro_bench.py --json file")
    rows = []
    for r in run["rows"]:
        try:
            replays = [ms for x in r["rounds"] for ms in x["replays_ms"]]
            # Runs before the twelfth kept one step time per round.
            steps = [ms for x in r["rounds"] for ms in x.get("steps_ms", [x.get("step_ms")]) if ms is not None]
            rows.append({"name": r["strategy"], "comm": r["comm_ms"], "comm_range": (min(replays), max(replays)),
                         "pred": r["predicted_comm_ms"], "step": r["step_ms"],
                         "step_range": (min(steps), max(steps)) if steps else (r["step_ms"], r["step_ms"]),
                         "state_mb": r["state_bytes"] / 1e6})
        except (KeyError, TypeError, ValueError) as e:
            name = r.get("strategy", "?") if isinstance(r, dict) else repr(r)
            raise ValueError(f"{path}: row {name} lacks a field ({e})")
    shape = run.get("shape") or ["?", "?"]
    title = f"{shape[0]} nodes x {shape[1]} ranks, {run.get('params', 0) / 1e6:.1f} M parameters"
    machine = (run.get("advice") or {}).get("machine", "")
    if machine:
        title += "\n" + machine.split("; tune file")[0]
    return title, rows, (run.get("advice") or {}).get("recommended")


def plot(runs, out):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("paro-plot: matplotlib is not installed (Debian: python3-matplotlib); no plot", file=sys.stderr)
        return False
    fig, axes = plt.subplots(3, len(runs), figsize=(6.5 * len(runs), 9.5), squeeze=False)
    for col, (title, rows, recommended) in enumerate(runs):
        x = list(range(len(rows)))
        names = [r["name"] for r in rows]

        def whiskers(key, rng):
            return [[r[key] - r[rng][0] for r in rows], [r[rng][1] - r[key] for r in rows]]

        ax = axes[0][col]
        ax.bar(x, [r["comm"] for r in rows], yerr=whiskers("comm", "comm_range"), color="#7aa6d6", capsize=3,
               label="measured (median, range)")
        ax.scatter(x, [r["pred"] for r in rows], marker="D", color="#c0392b", zorder=3, label="predicted")
        ax.set_ylabel("communication per step (ms)")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=8)
        ax = axes[1][col]
        ax.bar(x, [r["step"] for r in rows], yerr=whiskers("step", "step_range"), capsize=3,
               color=["#2c3e50" if n == recommended else "#95a5a6" for n in names])
        fastest = min(range(len(rows)), key=lambda i: rows[i]["step"])
        ax.annotate("fastest", (fastest, rows[fastest]["step_range"][1]), ha="center", va="bottom", fontsize=8)
        ax.set_ylabel("step (ms; dark: recommended)")
        ax = axes[2][col]
        ax.bar(x, [r["state_mb"] for r in rows], color="#8e9e6b")
        ax.set_ylabel("training state per rank (MB)")
        for a in axes[:, col]:
            a.set_xticks(x)
            a.set_xticklabels(names, rotation=45, fontsize=8)
            a.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    print(f"paro-plot: {out}")
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", metavar="RUN.json")
    ap.add_argument("-o", "--output", help="the PNG to write [paro.png beside the first file]")
    args = ap.parse_args()
    try:
        runs = [load(p) for p in args.runs]
    except ValueError as e:
        print(f"paro-plot: {e}", file=sys.stderr)
        return 1
    plot(runs, args.output or os.path.join(os.path.dirname(os.path.abspath(args.runs[0])), "paro.png"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
