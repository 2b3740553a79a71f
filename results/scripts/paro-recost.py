#!/usr/bin/env python3
"""Re-costs recorded PaRO measurements with the current advisor.

    results/scripts/paro-recost.py [--hoccl-paro PROG] [--advisor-args ARGS] RUN.json... [-- HOCCL_PARO_OPTIONS]

Each RUN.json is what paro_bench.py --json wrote (results/scripts/paro-measure.sh:
OUT/paro-a.json, OUT/paro-b.json). The measured communication per step
stays as recorded; hoccl-paro predicts it again from the same inputs (the
shape, model size, micro-steps, the intra-node calibration and the
optimizer time), so a change to the cost model can be checked against
earlier runs without the emulated cluster. Options after "--" go to
hoccl-paro (e.g. --reduce-mem-ratio 1.5 to see a setting's effect).
A --tune-file the run recorded that no longer exists is read from beside
RUN.json when it is there. Files written before paro_bench recorded its
advisor options need
--advisor-args (e.g. "--leaves 2 --node-gbit 1 --uplink-gbit 0.5
--oversubscription 4 --tune-file OUT/emulated-b.tune").

Prints per file how many strategies the prediction puts within 20% of the
measured time, each strategy's error, and the recommendation beside the
measured fastest step. Exits 1 if a file cannot be re-costed.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys


def refit(args, cal):
    """An older run's advisor options with its fitted --node-mem-gbps
    replaced by the all-gather it was fitted to (--intra-allgather)."""
    out = []
    i = 0
    while i < len(args):
        if args[i] == "--node-mem-gbps":
            i += 2
            continue
        out.append(args[i])
        i += 1
    if "--intra-allgather" not in out:
        out += ["--intra-allgather", f"{cal['allgather_elems'] * 4}:{cal['allgather_ms']:.4g}"]
    return out


def local_tune_file(args, path):
    """A --tune-file that is gone (the run's output directory was moved,
    as into results/) read from beside the run file when it is there."""
    out = list(args)
    for i, a in enumerate(out[:-1]):
        if a == "--tune-file" and not os.path.exists(out[i + 1]):
            beside = os.path.join(os.path.dirname(os.path.abspath(path)), os.path.basename(out[i + 1]))
            if os.path.exists(beside):
                out[i + 1] = beside
    return out


def recost(path, prog, advisor_args, extra, refit_intra=False):
    run = json.load(open(path))
    nodes, per_node = run["shape"]
    args = run.get("advisor_args")
    cal = run.get("calibration")
    if args is None:
        if advisor_args is None:
            raise ValueError("it does not record its advisor options: give --advisor-args")
        args = shlex.split(advisor_args)
        if cal:
            args += ["--node-mem-gbps", str(cal["node_mem_gbps"])]
        if run.get("optimizer_ns") is not None:
            args += ["--optimizer-ns", str(run["optimizer_ns"])]
    if refit_intra:
        if not cal:
            raise ValueError("it has no intra-node calibration to refit")
        args = refit(args, cal)
    args = local_tune_file(args, path)
    units = run.get("units", 8)
    cmd = [prog, "--json", "--nodes", str(nodes), "--ranks-per-node", str(per_node), "--params", str(run["params"]),
           "--accum", str(run["accum"]), "--dtype", "fp32", "--units", str(units)] + args + extra
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode not in (0, 3):
        raise ValueError(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
    advice = json.loads(out.stdout)
    predicted = {s["name"]: s["comm_ms"] for s in advice["strategies"]}
    errors = {r["strategy"]: predicted[r["strategy"]] / r["comm_ms"] - 1 for r in run["rows"]}
    return errors, advice.get("recommended"), run.get("measured_fastest")


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", help="paro_bench.py --json files")
    ap.add_argument("--hoccl-paro", default=os.environ.get("HOCCL_PARO", "build/hoccl-paro"))
    ap.add_argument("--advisor-args", help="machine options for files that do not record them")
    ap.add_argument("--refit-intra", action="store_true",
                    help="give the advisor the run's measured intra-node all-gather (--intra-allgather) in place "
                         "of the node memory rate fitted to it (runs before the fit moved into hoccl-paro)")
    args = ap.parse_args(argv)
    failed = False
    within = total = 0
    for path in args.runs:
        try:
            errors, rec, fastest = recost(path, args.hoccl_paro, args.advisor_args, extra, args.refit_intra)
        except (OSError, KeyError, ValueError) as e:
            print(f"{path}: cannot re-cost: {e}", file=sys.stderr)
            failed = True
            continue
        ok = sum(abs(e) <= 0.2 for e in errors.values())
        within += ok
        total += len(errors)
        print(f"{path}: {ok} of {len(errors)} within 20%; recommended {rec}, measured fastest step {fastest}")
        print("  " + ", ".join(f"{name} {100 * e:+.0f}%" for name, e in errors.items()))
    if total:
        print(f"all files: {within} of {total} within 20%")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
