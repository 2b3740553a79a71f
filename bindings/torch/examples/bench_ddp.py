"""DDP (or tensor-parallel) step time, hoccl vs gloo, side by side in one
run: for each process count, ddp_train.py (--model tp: tp_train.py, torch
2.x) runs once per backend (alternating, same model and data), and the
table gives each mean step time (slowest rank) and the ratio.

    PYTHONPATH=build/bindings/torch/python /usr/bin/python3 bindings/torch/examples/bench_ddp.py --nproc 2,4
    ... bench_ddp.py --model tp --nproc 2,4,8 --cluster 2x2 --floor

Other arguments go to the trainer (--width, --depth, --batch, --steps, ...).

--floor also runs with no communication at all (ddp_train.py --no-comm:
the buckets stay local; tp_train.py --no-comm: each rank's shard alone),
the step both backends share; the table then
gives each backend's communication time as its step minus that floor.
--cluster 2x2 also runs on an emulated cluster of 2 nodes x 2 ranks
(tests/cluster, root; --node-gbit sets its links). --plot FILE draws the
table (matplotlib).

Both backends run with the same allocator settings. By default (--malloc
keep) glibc is told to keep freed memory (MALLOC_TRIM_THRESHOLD_ and
MALLOC_MMAP_THRESHOLD_): with its defaults, a process can hand the 16 MB
weight-gradient temporaries of backward back to the kernel and fault them
in again on every step, which adds tens of milliseconds to some runs and
not others (results/20261126-ddp-malloc). --malloc
system leaves glibc's defaults. With --repeats R each backend runs R times,
alternating, and the table gives the median.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.normpath(os.path.join(HERE, "..", "..", "..", "tests", "cluster", "cluster.sh"))
NO_COMM = "none"  # the floor's column: DDP without communication

# glibc: keep freed memory in the heap (no trimming) and serve large blocks
# from it rather than from fresh mappings.
KEEP_MEMORY = {"MALLOC_TRIM_THRESHOLD_": str(1 << 36), "MALLOC_MMAP_THRESHOLD_": str(1 << 32)}


def last_json(text, what):
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise SystemExit(f"bench_ddp: {what} printed no result; its output ends with:\n{text[-3000:]}")


TRAINERS = {"ddp": "ddp_train.py", "tp": "tp_train.py"}


def run(backend, where, extra, env, node_gbit, trainer="ddp_train.py"):
    """One trainer run; where is (nodes, ranks per node), nodes 0 = this machine."""
    nodes, per_node = where
    args = ["--json", "--print-every", "1000000"] + extra
    args += ["--backend", "hoccl", "--no-comm"] if backend == NO_COMM else ["--backend", backend]
    train = [sys.executable, os.path.join(HERE, trainer)] + args
    if nodes == 0:
        out = subprocess.run(train + ["--nproc", str(per_node)], capture_output=True, text=True, env=env)
    else:
        keep = [f"{k}={env[k]}" for k in ["PYTHONPATH", "OMP_NUM_THREADS"] + list(KEEP_MEMORY) if k in env]
        cmd = [CLUSTER, "run", "--nodes", str(nodes), "--ranks-per-node", str(per_node), "--node-gbit",
               str(node_gbit), "--timeout", "1800", "--", "env"] + keep + train
        out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    what = f"{backend} on {label(where)}"
    if out.returncode != 0:
        raise SystemExit(f"bench_ddp: {what} failed (exit {out.returncode}):\n{(out.stdout + out.stderr)[-3000:]}")
    return last_json(out.stdout, what)


def label(where):
    nodes, per_node = where
    return f"{per_node} processes" if nodes == 0 else f"{nodes} nodes x {per_node}"


def parse_cluster(text):
    try:
        nodes, per_node = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise SystemExit(f"bench_ddp: --cluster takes NODESxRANKS shapes such as 2x2, not '{text}'")
    if nodes < 2 or per_node < 1:
        raise SystemExit(f"bench_ddp: --cluster {text}: at least 2 nodes and 1 rank per node")
    return nodes, per_node


def median(runs):
    ordered = sorted(runs, key=lambda r: r["step_ms"])
    return ordered[(len(ordered) - 1) // 2]


def plot(path, rows, backends, title, what="DDP"):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(rows), 4))
    width = 0.8 / len(backends)
    for i, b in enumerate(backends):
        xs = [j + (i - (len(backends) - 1) / 2) * width for j in range(len(rows))]
        ys = [res[b]["step_ms"] for _, res in rows]
        bars = ax.bar(xs, ys, width, label="no communication" if b == NO_COMM else b)
        ax.bar_label(bars, labels=[f"{y:.0f}" if y >= 100 else f"{y:.1f}" for y in ys], fontsize=7)
    ax.set_xticks(range(len(rows)), [label(w).replace(" x ", "x") for w, _ in rows], fontsize=8)
    ax.set_ylabel(f"{what} step time (ms, slowest rank's mean)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", default="2,4", help="comma-separated process counts on this machine ('' for none)")
    ap.add_argument("--cluster", default="", help="comma-separated emulated-cluster shapes NODESxRANKS, e.g. 2x2")
    ap.add_argument("--node-gbit", type=float, default=1, help="the emulated cluster's node links (Gbit/s)")
    ap.add_argument("--backends", default="gloo,hoccl")
    ap.add_argument("--model", choices=sorted(TRAINERS), default="ddp",
                    help="ddp: data parallel (ddp_train.py); tp: tensor parallel (tp_train.py, torch 2.x)")
    ap.add_argument("--floor", action="store_true", help="also run DDP without communication (the shared floor)")
    ap.add_argument("--repeats", type=int, default=1, help="runs per backend and process count (median)")
    ap.add_argument("--malloc", choices=["keep", "system"], default="keep",
                    help="keep: glibc keeps freed memory (both backends); system: glibc's defaults")
    ap.add_argument("--plot", metavar="FILE", help="write a bar chart of the table (PNG)")
    args, extra = ap.parse_known_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    places = [(0, int(v)) for v in args.nproc.split(",") if v]
    places += [parse_cluster(v) for v in args.cluster.split(",") if v]
    if not places:
        ap.error("nothing to run: give --nproc and/or --cluster")
    if any(n for n, _ in places) and not os.path.exists(CLUSTER):
        ap.error(f"--cluster needs {CLUSTER}")
    env = dict(os.environ)
    if args.malloc == "keep":
        env.update(KEEP_MEMORY)
    backends = ([NO_COMM] if args.floor else []) + args.backends.split(",")
    rows = []
    for where in places:
        results = {}
        for _ in range(args.repeats):  # alternate the backends, so drift hits both
            for b in backends:
                results.setdefault(b, []).append(run(b, where, extra, env, args.node_gbit, TRAINERS[args.model]))
        res = {b: median(results[b]) for b in backends}
        rows.append((where, res))
        first = res[backends[-1]]
        print(f"# {label(where)}, {first['params']} parameters, batch {first['batch']}/rank, "
              f"{first['steps']} steps, malloc {args.malloc}: " +
              ", ".join(f"{b} " + "/".join(f"{r['step_ms']:.1f}" for r in results[b]) + " ms" for b in backends),
              flush=True)
    peers = [b for b in backends if b != NO_COMM]
    ours, theirs = peers[-1], peers[0]
    print()
    cols = [("no comm" if b == NO_COMM else b) + " step (ms)" for b in backends] + [f"{ours} / {theirs}"]
    if args.floor:
        cols += [f"{b} comm (ms)" for b in peers] + [f"comm {ours} / {theirs}"]
    print("| where | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for where, res in rows:
        cells = [f"{res[b]['step_ms']:.1f}" for b in backends]
        cells.append(f"{res[ours]['step_ms'] / res[theirs]['step_ms']:.2f}")
        if args.floor:
            comm = {b: res[b]["step_ms"] - res[NO_COMM]["step_ms"] for b in peers}
            cells += [f"{comm[b]:.1f}" for b in peers]
            cells.append(f"{comm[ours] / comm[theirs]:.2f}" if comm[theirs] > 0 else "-")
        print(f"| {label(where)} | " + " | ".join(cells) + " |")
    by_n = {w[1]: res for w, res in rows if w[0] == 0}
    for low, high in [(4, 8), (2, 4)]:
        if low in by_n and high in by_n:
            # Per-rank throughput is one batch per step: at high processes
            # against low, step(low) / step(high) of it.
            print(f"per-rank throughput at {high} processes against {low}: " +
                  ", ".join(f"{b} {by_n[low][b]['step_ms'] / by_n[high][b]['step_ms']:.2f}" for b in backends))
            break
    if args.plot:
        first = rows[0][1][backends[-1]]
        what = "DDP" if args.model == "ddp" else "tensor-parallel"
        plot(args.plot, rows, backends, f"{what}, {first['params']} parameters, batch {first['batch']}/rank", what)


if __name__ == "__main__":
    main()
