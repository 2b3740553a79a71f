"""Starts the ranks of a test as separate processes (env:// rendezvous on
127.0.0.1) and collects what each wrote."""
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(scenario, n, outdir, backend="hoccl", timeout_s=60, limit_s=300, rank_env=None):
    """Runs worker.py SCENARIO on n ranks; returns (return codes, outputs,
    per-rank JSON results or None). rank_env(r) gives extra environment
    variables for rank r."""
    os.makedirs(outdir, exist_ok=True)
    port = free_port()
    procs, logs = [], []
    for r in range(n):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), LOCAL_RANK=str(r), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), TEST_BACKEND=backend, TEST_TIMEOUT=str(timeout_s),
                   OMP_NUM_THREADS="1")
        env.update(rank_env(r) if rank_env else {})
        env["PYTHONPATH"] = os.pathsep.join(p for p in (HERE, env.get("PYTHONPATH")) if p)
        logs.append(open(os.path.join(outdir, f"rank{r}.log"), "w+"))
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "worker.py"), scenario, outdir],
                                      env=env, stdout=logs[-1], stderr=subprocess.STDOUT))
    # Reap every rank as soon as it exits: a killed rank left a zombie would
    # still look alive to its peers (kill(pid, 0) succeeds on a zombie).
    deadline = time.monotonic() + limit_s
    killed = False
    while None in [p.poll() for p in procs]:  # a list, not any(): poll (reap) every rank
        if time.monotonic() > deadline:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            killed = True
            for p in procs:
                p.wait()
            break
        time.sleep(0.05)
    codes, outputs = [p.returncode for p in procs], []
    for f in logs:
        f.seek(0)
        outputs.append((f"(killed after {limit_s} s)\n" if killed else "") + f.read())
        f.close()
    results = []
    for r in range(n):
        path = os.path.join(outdir, f"rank{r}.json")
        results.append(json.load(open(path)) if os.path.exists(path) else None)
    return codes, outputs, results


def run_example(name, args, n, per_node, node_prefix, limit_s=300):
    """Runs examples/NAME as run_script does."""
    return run_script(os.path.join(os.path.dirname(HERE), "examples", name), args, n, per_node, node_prefix,
                      limit_s)


def run_script(script, args, n, per_node, node_prefix, limit_s=300):
    """Runs the Python script SCRIPT with ARGS on n ranks (env:// rendezvous
    on 127.0.0.1), per_node of them on each "node" (HOCCL_HOSTID
    NODE_PREFIX<i>); returns (return codes, outputs)."""
    port = free_port()
    procs = [subprocess.Popen([sys.executable, script] + args,
                              env=dict(os.environ, RANK=str(r), WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                                       MASTER_PORT=str(port), OMP_NUM_THREADS="1",
                                       HOCCL_HOSTID=f"{node_prefix}{r // per_node}"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(n)]
    outs = [p.communicate(timeout=limit_s)[0] for p in procs]
    return [p.returncode for p in procs], outs


def describe(codes, outputs):
    return "\n".join(f"--- rank {r}: exit {c}\n{o[-3000:]}" for r, (c, o) in enumerate(zip(codes, outputs)))


REPO = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
CLUSTER = os.path.join(REPO, "tests", "cluster", "cluster.sh")


def in_ci():
    """The project's rule (tests/ci-rule.sh): CI set and not 0/false/no/off."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no", "off")


def cluster_problem():
    """None when the emulated cluster (tests/cluster) can run here, else why not."""
    if not os.path.exists(CLUSTER):
        return f"{CLUSTER} is missing"
    check = subprocess.run([CLUSTER, "check"], capture_output=True, text=True)
    return None if check.returncode == 0 else (check.stderr.strip() or check.stdout.strip() or "cluster.sh check failed")


def launch_on_cluster(scenario, nodes, per_node, outdir, extra_env=None, timeout_s=60, limit_s=600, node_gbit=1):
    """Runs worker.py SCENARIO on an emulated cluster of `nodes` network
    namespaces with `per_node` ranks each (tests/cluster/cluster.sh run:
    real TCP between namespaces over rate-limited links). Returns (exit
    code, output, per-rank JSON results or None)."""
    os.makedirs(outdir, exist_ok=True)
    env = {"TEST_BACKEND": "hoccl", "TEST_TIMEOUT": str(timeout_s), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p)}
    env.update(extra_env or {})
    cmd = [CLUSTER, "run", "--nodes", str(nodes), "--node-gbit", str(node_gbit), "--ranks-per-node", str(per_node),
           "--timeout", str(limit_s), "--print-all", "--logdir", os.path.join(outdir, "logs"), "--",
           "env"] + [f"{k}={v}" for k, v in env.items()] + [sys.executable, os.path.join(HERE, "worker.py"),
                                                            scenario, outdir]
    run = subprocess.run(cmd, capture_output=True, text=True)
    results = []
    for r in range(nodes * per_node):
        path = os.path.join(outdir, f"rank{r}.json")
        results.append(json.load(open(path)) if os.path.exists(path) else None)
    return run.returncode, (run.stdout + run.stderr)[-6000:], results
