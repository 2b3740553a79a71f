"""hoccl_torch.paro: every strategy against a single-process reference, its
collectives against the strategy table, its memory against the formula,
on 1 node x 4 ranks and emulated 2 x 2 and 2 x 4 nodes (HOCCL_HOSTID per
rank; the ranks are processes on this machine).

    PYTHONPATH=build/bindings/torch/python /usr/bin/python3 -m pytest bindings/torch/tests/test_paro.py
"""
import collections
import functools
import json
import os

import pytest
import torch
import torch.nn as nn

import launch
import model_common

ACCUM = 2
SHAPES = [(1, 4), (2, 2), (2, 4)]  # (nodes, ranks per node)
RESUME = {(1, 4): "ZeRO-3,DDP", (2, 2): "IIG,NIG", (2, 4): "NIG,MiCS"}
# The measurement scripts, beside the results they produce: paro-plot.py
# and the probes of PaRO's groups.
SCRIPTS = os.path.join(launch.REPO, "results", "scripts")
STRATEGIES = ["DDP", "ZeRO-1", "ZeRO-2", "ZeRO-3", "MiCS", "NIG", "NII", "IIG", "IGG", "ING"]
LEVELS = {"DDP": "NNN", "ZeRO-1": "NNG", "ZeRO-2": "NGG", "ZeRO-3": "GGG", "MiCS": "III",
          "NIG": "NIG", "NII": "NII", "IIG": "IIG", "IGG": "IGG", "ING": "ING"}

# The strategy table of docs/paro.md, written out here on its own (not taken
# from the implementation): per (phase, group, kind), how many calls per unit
# and how many elements in units of the padded parameter count P ("rail" in
# units of P / m). Micro-step rows happen ACCUM times per step.
TABLE = {
    "DDP": {("boundary", "world", "AR"): (1, "P")},
    "ZeRO-1": {("boundary", "world", "RS"): (1, "P"), ("step", "world", "AG"): (1, "P")},
    "ZeRO-2": {("micro", "world", "RS"): (1, "P"), ("step", "world", "AG"): (1, "P")},
    "ZeRO-3": {("micro", "world", "AG"): (2, "P"), ("micro", "world", "RS"): (1, "P")},
    "NIG": {("micro", "intra", "RS"): (1, "P"), ("boundary", "rail", "RS"): (1, "P/m"),
            ("step", "world", "AG"): (1, "P")},
    "NII": {("micro", "intra", "RS"): (1, "P"), ("boundary", "rail", "AR"): (1, "P/m"),
            ("step", "intra", "AG"): (1, "P")},
    "IIG": {("micro", "intra", "AG"): (2, "P"), ("micro", "intra", "RS"): (1, "P"),
            ("boundary", "rail", "RS"): (1, "P/m"), ("step", "rail", "AG"): (1, "P/m")},
    "IGG": {("micro", "intra", "AG"): (2, "P"), ("micro", "world", "RS"): (1, "P"),
            ("step", "rail", "AG"): (1, "P/m")},
    "ING": {("micro", "intra", "AG"): (2, "P"), ("boundary", "world", "RS"): (1, "P"),
            ("step", "rail", "AG"): (1, "P/m")},
    "MiCS": {("micro", "intra", "AG"): (2, "P"), ("micro", "intra", "RS"): (1, "P"),
             ("boundary", "rail", "AR"): (1, "P/m")},
}

_runs = {}


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("hoccl_paro"))


def run_shape(shape, tmp_root):
    """All strategies on one shape, in one launch; cached for the tests."""
    if shape not in _runs:
        nodes, m = shape
        outdir = os.path.join(tmp_root, f"paro{nodes}x{m}")
        env = {"PARO_ACCUM": str(ACCUM), "PARO_RESUME": RESUME[shape]}
        if os.environ.get("HOCCL_PARO"):
            env["HOCCL_PARO"] = os.environ["HOCCL_PARO"]
        codes, outputs, results = launch.launch(
            "paro", nodes * m, outdir, timeout_s=60, limit_s=600,
            rank_env=lambda r: dict(env, HOCCL_HOSTID=f"paro-test-node{r // m}"))
        _runs[shape] = (outdir, codes, outputs, results)
    outdir, codes, outputs, results = _runs[shape]
    assert codes == [0] * len(codes) and all(results), launch.describe(codes, outputs)
    return outdir, results


@functools.lru_cache(maxsize=None)
def reference_state(world, steps):
    """(weights, Adam state by parameter name); the tests only read them."""
    model = model_common.make_model()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    for step in range(steps):
        opt.zero_grad()
        for a in range(ACCUM):
            xs, ys = zip(*(model_common.batch(step * ACCUM + a, r) for r in range(world)))
            nn.functional.mse_loss(model(torch.cat(xs)), torch.cat(ys)).backward()
        opt.step()
    names = [n for n, _ in model.named_parameters()]
    state = {names[i]: s for i, s in opt.state_dict()["state"].items()}
    return model.state_dict(), state


def assert_matches_reference(sd, world, steps, what):
    want_model, want_state = reference_state(world, steps)
    for k, want in want_model.items():
        got = sd["model"][k]
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-6), \
            f"{what}: weight {k} differs by {(got - want).abs().max().item()}"
    for k, want in want_state.items():
        got = sd["optimizer"]["state"][k]
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.allclose(got[key], want[key], rtol=1e-5, atol=1e-7), f"{what}: {k} {key}"
        assert float(got["step"]) == float(want["step"]) == steps


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_weights_equal_reference(shape, strategy, tmp_root):
    outdir, _ = run_shape(shape, tmp_root)
    sd = torch.load(os.path.join(outdir, f"paro_{strategy}.pt"))
    assert_matches_reference(sd, shape[0] * shape[1], model_common.STEPS, strategy)


def check_traces(results, shape, strategy):
    nodes, m = shape
    sizes = {"intra": m, "rail": nodes, "world": nodes * m}
    for res in results:
        got_all = res["strategies"][strategy]
        P, units = got_all["padded"], got_all["units"]
        want = {}
        for (phase, group, kind), (calls, size) in TABLE[strategy].items():
            if sizes[group] == 1:
                continue  # done locally: nothing to send
            times = ACCUM if phase == "micro" else 1
            numel = P if size == "P" else P // m
            want[(phase, group, kind)] = (calls * units * times, calls * numel * times)
        for i, trace in enumerate(got_all["traces"]):
            got = collections.defaultdict(lambda: [0, 0])
            for phase, group, kind, numel in trace:
                got[(phase, group, kind)][0] += 1
                got[(phase, group, kind)][1] += numel
            got = {k: tuple(v) for k, v in got.items()}
            assert got == want, f"rank {res['rank']} step {i}: (calls, elements) {got} != table {want}"


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_collectives_follow_the_table(shape, strategy, tmp_root):
    _, results = run_shape(shape, tmp_root)
    check_traces(results, shape, strategy)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_state_bytes_equal_formula(shape, strategy, tmp_root):
    nodes, m = shape
    share = {"N": 1, "I": m, "G": nodes * m}
    p, g, o = LEVELS[strategy]
    _, results = run_shape(shape, tmp_root)
    for res in results:
        r = res["strategies"][strategy]
        P = r["padded"]
        # fp32 parameters and gradients; the optimizer holds an fp32 master
        # and Adam's two moments.
        want = {"parameters": 4 * P // share[p], "gradients": 4 * P // share[g], "optimizer": 12 * P // share[o]}
        got = {k: r["bytes"][k] for k in want}
        assert got == want, f"rank {res['rank']}: {got} != {want}"


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_checkpoint_moves_between_strategies(shape, tmp_root):
    outdir, _ = run_shape(shape, tmp_root)
    sd = torch.load(os.path.join(outdir, "paro_resumed.pt"))
    assert_matches_reference(sd, shape[0] * shape[1], model_common.STEPS, f"resumed {RESUME[shape]}")


def test_wrong_use_raises_naming_it(tmp_root):
    _, results = run_shape((2, 2), tmp_root)
    for res in results:
        e = res["errors"]
        assert e["strategy"] and "unknown strategy 'XYZ'" in e["strategy"], e
        assert e["accum"] and "accumulation_steps" in e["accum"], e
        assert e["early_step"] and "after 1 backward passes" in e["early_step"], e


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_auto_takes_the_advisors_recommendation(shape, tmp_root):
    _, results = run_shape(shape, tmp_root)
    picks = {res["auto"]["strategy"] for res in results}
    assert len(picks) == 1, f"the ranks chose differently: {picks}"
    advice = results[0]["auto"]["advice"]
    assert advice["nodes"] == shape[0] and advice["ranks_per_node"] == shape[1], advice
    rows = {r["name"]: r for r in advice["strategies"]}
    assert sorted(rows) == sorted(STRATEGIES)
    best = min(rows.values(), key=lambda r: (r["comm_ms"], r["state_bytes"]))
    assert picks == {advice["recommended"]} == {best["name"]}, advice


CLUSTER_STRATEGIES = ["DDP", "ZeRO-3", "MiCS", "NIG", "IIG", "ING"]


def test_emulated_cluster_2x2(tmp_root):
    """Six strategies across 2 network namespaces x 2 ranks (tests/cluster:
    TCP over 1 Gbit/s shaped links between the nodes): the reference's
    weights and the table's collectives there too."""
    why = launch.cluster_problem()
    if why:
        (pytest.fail if launch.in_ci() else pytest.skip)(f"the emulated cluster cannot run here: {why}")
    outdir = os.path.join(tmp_root, "paro_cluster")
    env = {"PARO_ACCUM": str(ACCUM), "PARO_STRATEGIES": ",".join(CLUSTER_STRATEGIES), "PARO_RESUME": "IIG,NIG"}
    if os.environ.get("HOCCL_PARO"):
        env["HOCCL_PARO"] = os.environ["HOCCL_PARO"]
    rc, output, results = launch.launch_on_cluster("paro", 2, 2, outdir, env, limit_s=900)
    assert rc == 0 and all(results), output
    for name in CLUSTER_STRATEGIES:
        assert_matches_reference(torch.load(os.path.join(outdir, f"paro_{name}.pt")), 4, model_common.STEPS, name)
        check_traces(results, (2, 2), name)
    assert_matches_reference(torch.load(os.path.join(outdir, "paro_resumed.pt")), 4, model_common.STEPS,
                             "resumed IIG,NIG")
    assert {r["shape"]["node"] for r in results} == {0, 1}, [r["shape"] for r in results]


def test_paro_bench_reports_measured_beside_predicted(tmp_root):
    """examples/paro_bench.py on 2 nodes x 2 ranks (HOCCL_HOSTID): every
    strategy asked for has a row with a positive measured and predicted
    communication time, the probe's intra-node all-gather was fitted by the
    advisor (its fitted model predicts the probe's median), and every probe
    block was kept: 7 up front and one before each strategy in each round."""
    out_json = os.path.join(tmp_root, "paro_bench.json")
    codes, outs = launch.run_example(
        "paro_bench.py", ["--params", "40K", "--layers", "4", "--batch", "2", "--accum", "2", "--steps", "2",
                          "--rounds", "2", "--strategies", "DDP,ZeRO-3,MiCS,NIG", "--calibrate-intra", "--timeout",
                          "120", "--advisor-args", "--node-gbit 1", "--json", out_json],
        4, 2, "paro-bench-node")
    assert codes == [0] * 4, "\n".join(outs)
    run = json.load(open(out_json))
    assert [r["strategy"] for r in run["rows"]] == ["DDP", "ZeRO-3", "MiCS", "NIG"]
    for r in run["rows"]:
        assert r["comm_ms"] > 0 and r["predicted_comm_ms"] > 0 and r["step_ms"] > 0, r
        assert len(r["rounds"]) == 2 and all(len(x["replays_ms"]) == 2 for x in r["rounds"]), r
        assert min(ms for x in r["rounds"] for ms in x["replays_ms"]) <= r["comm_ms"], r
        steps = sorted(ms for x in r["rounds"] for ms in x["steps_ms"])
        assert len(steps) == 4 and r["step_range_ms"] == [steps[0], steps[-1]], r
        assert steps[0] <= r["step_ms"] <= steps[-1], r
    cal = run["calibration"]
    assert cal["blocks"] == 7 + 2 * 4 == len(cal["rank0_blocks_ms"]), cal
    assert cal["allgather_elems"] % 4 == 0 and cal["allgather_ms"] > 0, cal
    assert "--intra-allgather" in run["advisor_args"], run["advisor_args"]
    if not cal["warning"]:
        assert abs(cal["predicted_ms"] / cal["allgather_ms"] - 1) < 0.02, cal
    assert "recommended: " in outs[0] and "| MiCS |" in outs[0], outs[0]
    check_plot(out_json, tmp_root)
    # One model at a time: the same rows, every step and replay kept.
    codes, outs = launch.run_example(
        "paro_bench.py", ["--params", "40K", "--layers", "4", "--batch", "2", "--accum", "2", "--steps", "1",
                          "--rounds", "2", "--strategies", "ZeRO-1,NII", "--one-at-a-time", "--timeout", "120",
                          "--advisor-args", "--node-gbit 1", "--json", out_json],
        4, 2, "paro-bench-node")
    assert codes == [0] * 4, "\n".join(outs)
    run = json.load(open(out_json))
    assert run["one_at_a_time"] and [r["strategy"] for r in run["rows"]] == ["ZeRO-1", "NII"], run["rows"]
    for r in run["rows"]:
        assert [len(x["steps_ms"]) for x in r["rounds"]] == [1, 1] and r["state_bytes"] > 0, r
    assert "one model at a time" in outs[0], outs[0]


def check_plot(run_json, tmp_root):
    """results/scripts/paro-plot.py draws a run into a PNG (when matplotlib is there)
    and refuses a file that is not a run, naming it."""
    import subprocess
    import sys
    tool = os.path.join(SCRIPTS, "paro-plot.py")
    png = os.path.join(tmp_root, "paro.png")
    done = subprocess.run([sys.executable, tool, run_json, "-o", png], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    try:
        import matplotlib  # noqa: F401
        with open(png, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    except ImportError:
        assert "matplotlib is not installed" in done.stderr, done.stderr
    bad = os.path.join(tmp_root, "not-a-run.json")
    with open(bad, "w") as f:
        json.dump({"rows": [{"strategy": "DDP"}]}, f)
    done = subprocess.run([sys.executable, tool, bad, "-o", png], capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "not-a-run.json: row DDP lacks a field" in done.stderr, done.stderr


def test_group_switch_probe_times_every_case(tmp_root):
    """results/scripts/group_switch_probe.py on 2 nodes x 2 ranks (HOCCL_HOSTID):
    every case has 8 positive per-call times and a positive total, and a
    job of one rank per node is refused, saying why."""
    out_json = os.path.join(tmp_root, "switch.json")

    def run(n, per_node, extra):
        args = ["--elems", "4096", "--reps", "3", "--pause", "0.01"] + extra
        return launch.run_script(os.path.join(SCRIPTS, "group_switch_probe.py"), args, n, per_node, "switch-node",
                                 limit_s=120)

    codes, outs = run(4, 2, ["--json", out_json])
    assert codes == [0] * 4, "\n".join(outs)
    cases = json.load(open(out_json))
    assert len(cases) == 4 and "after 8 rail RS" in cases, cases
    for name, c in cases.items():
        assert len(c["calls_ms"]) == 8 and all(x > 0 for x in c["calls_ms"]), (name, c)
        assert c["total_ms"] > 0, (name, c)
    codes, outs = run(2, 1, [])
    assert all(c != 0 for c in codes), outs
    assert "needs at least 2 nodes of 2 ranks (this job: 2 x 1)" in outs[0], outs[0]


def test_group_calls_probe_times_every_case(tmp_root):
    """results/scripts/group_calls_probe.py on 2 nodes x 2 ranks (HOCCL_HOSTID):
    every case has its blocks, all positive, and a median among them; a
    job of one rank per node is refused, saying why."""
    out_json = os.path.join(tmp_root, "calls.json")

    def run(n, per_node, extra):
        args = ["--elems", "4096", "--blocks", "3"] + extra
        return launch.run_script(os.path.join(SCRIPTS, "group_calls_probe.py"), args, n, per_node, "calls-node",
                                 limit_s=120)

    codes, outs = run(4, 2, ["--json", out_json])
    assert codes == [0] * 4, "\n".join(outs)
    cases = json.load(open(out_json))
    assert len(cases) == 5 and "rail all-reduce (shard)" in cases, cases
    for name, c in cases.items():
        assert len(c["blocks_ms"]) == 3 and all(x > 0 for x in c["blocks_ms"]), (name, c)
        assert c["median_ms"] in c["blocks_ms"], (name, c)
    codes, outs = run(2, 1, [])
    assert all(c != 0 for c in codes), outs
    assert "needs at least 2 nodes of 2 ranks (this job: 2 x 1)" in outs[0], outs[0]
