"""DDP step time, hoccl vs gloo, side by side in one run: for each process
count, ddp_train.py runs once per backend (alternating, same model and
data), and the table gives each mean step time (slowest rank) and the ratio.

    PYTHONPATH=build/bindings/torch/python /usr/bin/python3 bindings/torch/examples/bench_ddp.py --nproc 2,4

Other arguments go to ddp_train.py (--width, --depth, --batch, --steps, ...).

Both backends run with the same allocator settings. By default (--malloc
keep) glibc is told to keep freed memory (MALLOC_TRIM_THRESHOLD_ and
MALLOC_MMAP_THRESHOLD_): with its defaults, a process can hand the 16 MB
weight-gradient temporaries of backward back to the kernel and fault them
in again on every step, which adds tens of milliseconds to some runs and
not others (README, "PyTorch": step time). --malloc
system leaves glibc's defaults. With --repeats R each backend runs R times,
alternating, and the table gives the median.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


# glibc: keep freed memory in the heap (no trimming) and serve large blocks
# from it rather than from fresh mappings.
KEEP_MEMORY = {"MALLOC_TRIM_THRESHOLD_": str(1 << 36), "MALLOC_MMAP_THRESHOLD_": str(1 << 32)}


def run(backend, nproc, extra, env):
    cmd = [sys.executable, os.path.join(HERE, "ddp_train.py"), "--backend", backend, "--nproc", str(nproc),
           "--json", "--print-every", "1000000"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def median_run(backend, nproc, extra, env, results):
    """Appends one run of backend to results[backend]; returns the median so far."""
    results.setdefault(backend, []).append(run(backend, nproc, extra, env))
    runs = sorted(results[backend], key=lambda r: r["step_ms"])
    return runs[(len(runs) - 1) // 2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", default="2,4", help="comma-separated process counts")
    ap.add_argument("--backends", default="gloo,hoccl")
    ap.add_argument("--repeats", type=int, default=1, help="runs per backend and process count (median)")
    ap.add_argument("--malloc", choices=["keep", "system"], default="keep",
                    help="keep: glibc keeps freed memory (both backends); system: glibc's defaults")
    args, extra = ap.parse_known_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    env = dict(os.environ)
    if args.malloc == "keep":
        env.update(KEEP_MEMORY)
    backends = args.backends.split(",")
    rows = []
    for n in [int(v) for v in args.nproc.split(",")]:
        results, res = {}, {}
        for _ in range(args.repeats):  # alternate the backends, so drift hits both
            for b in backends:
                res[b] = median_run(b, n, extra, env, results)
        rows.append((n, res))
        first = res[backends[0]]
        print(f"# {n} processes, {first['params']} parameters, batch {first['batch']}/rank, "
              f"{first['steps']} steps, malloc {args.malloc}: " +
              ", ".join(f"{b} " + "/".join(f"{r['step_ms']:.1f}" for r in results[b]) + " ms" for b in backends),
              flush=True)
    print()
    print("| processes | " + " | ".join(f"{b} step (ms)" for b in backends) +
          f" | {backends[-1]} / {backends[0]} |")
    print("|---" * (len(backends) + 2) + "|")
    for n, res in rows:
        ratio = res[backends[-1]]["step_ms"] / res[backends[0]]["step_ms"]
        print(f"| {n} | " + " | ".join(f"{res[b]['step_ms']:.1f}" for b in backends) + f" | {ratio:.2f} |")


if __name__ == "__main__":
    main()
