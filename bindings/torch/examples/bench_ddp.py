"""DDP step time, hoccl vs gloo, side by side in one run: for each process
count, ddp_train.py runs once per backend (alternating, same model and
data), and the table gives each mean step time (slowest rank) and the ratio.

    PYTHONPATH=build/bindings/torch/python /usr/bin/python3 bindings/torch/examples/bench_ddp.py --nproc 2,4

Other arguments go to ddp_train.py (--width, --depth, --batch, --steps, ...).
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(backend, nproc, extra):
    cmd = [sys.executable, os.path.join(HERE, "ddp_train.py"), "--backend", backend, "--nproc", str(nproc),
           "--json", "--print-every", "1000000"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", default="2,4", help="comma-separated process counts")
    ap.add_argument("--backends", default="gloo,hoccl")
    args, extra = ap.parse_known_args()
    backends = args.backends.split(",")
    rows = []
    for n in [int(v) for v in args.nproc.split(",")]:
        res = {b: run(b, n, extra) for b in backends}
        rows.append((n, res))
        first = res[backends[0]]
        print(f"# {n} processes, {first['params']} parameters, batch {first['batch']}/rank, "
              f"{first['steps']} steps: " + ", ".join(f"{b} {r['step_ms']:.1f} ms" for b, r in res.items()),
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
