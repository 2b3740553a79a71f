"""The hoccl backend for torch.distributed, at 1 to 4 ranks (separate
processes). Run by ctest (torch_backend) or directly:

    PYTHONPATH=build/bindings/torch/python /usr/bin/python3 -m pytest bindings/torch/tests
"""
import os
import re

import pytest
import torch

import launch
import model_common

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = [1, 2, 3, 4]
with open(os.path.join(HERE, "worker.py")) as _f:
    CHECK_NAMES = re.findall(r"^@check\ndef (\w+)", _f.read(), flags=re.M)

_methods_cache = {}


def methods_results(n, tmp_root):
    """Runs every check at n ranks once; later tests read the results."""
    if n not in _methods_cache:
        codes, outputs, results = launch.launch("methods", n, os.path.join(tmp_root, f"methods{n}"))
        _methods_cache[n] = (codes, outputs, results)
    return _methods_cache[n]


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("hoccl_torch"))


def test_import_registers_backend():
    import torch.distributed as dist

    import hoccl_torch
    assert "HOCCL" in dist.Backend._plugins
    import importlib
    importlib.reload(hoccl_torch)  # a second import must not register twice
    assert hoccl_torch.hoccl_version > 0


@pytest.mark.parametrize("name", CHECK_NAMES)
@pytest.mark.parametrize("n", SIZES)
def test_method(n, name, tmp_root):
    codes, outputs, results = methods_results(n, tmp_root)
    if any(r is None for r in results):
        pytest.fail(f"a rank did not finish the checks:\n{launch.describe(codes, outputs)}")
    errors = {r["rank"]: r["checks"][name] for r in results if r["checks"].get(name)}
    assert not errors, "\n".join(f"rank {k}: {v}" for k, v in errors.items())
    assert codes == [0] * n, launch.describe(codes, outputs)


def _weights(outdir, n):
    return [torch.load(os.path.join(outdir, f"weights{r}.pt")) for r in range(n)]


def _assert_close(got, want, what):
    for k in want:
        assert torch.allclose(got[k], want[k], rtol=1e-5, atol=1e-6), \
            f"{what}: {k} differs by {(got[k] - want[k]).abs().max().item()}"


@pytest.mark.parametrize("n", [2, 4])
def test_ddp_matches_reference_and_gloo(n, tmp_root):
    runs = {}
    for backend in ("hoccl", "gloo"):
        outdir = os.path.join(tmp_root, f"ddp_{backend}{n}")
        codes, outputs, results = launch.launch("ddp", n, outdir, backend=backend)
        assert codes == [0] * n, launch.describe(codes, outputs)
        runs[backend] = _weights(outdir, n)
    ref, _ = model_common.reference(n, torch.optim.SGD, lr=0.1, momentum=0.9)
    hoccl = runs["hoccl"]
    for r in range(1, n):  # every rank holds exactly the same weights
        for k in hoccl[0]:
            assert torch.equal(hoccl[r][k], hoccl[0][k]), f"rank {r} differs from rank 0 in {k}"
    _assert_close(hoccl[0], ref, "hoccl DDP vs the single-process reference")
    _assert_close(hoccl[0], runs["gloo"][0], "hoccl DDP vs gloo DDP")


def _on_emulated_cluster(scenario, tmp_root):
    """Runs worker.py SCENARIO on 2 emulated nodes x 2 ranks (skipped where
    the cluster cannot run, a failure in CI); returns its output directory."""
    why = launch.cluster_problem()
    if why:
        (pytest.fail if launch.in_ci() else pytest.skip)(f"the emulated cluster cannot run here: {why}")
    outdir = os.path.join(tmp_root, f"{scenario}_cluster")
    rc, output, results = launch.launch_on_cluster(scenario, 2, 2, outdir)
    assert rc == 0 and all(results), output
    return outdir


def test_ddp_on_emulated_cluster(tmp_root):
    """DDP across 2 network namespaces x 2 ranks (tests/cluster: TCP over
    1 Gbit/s shaped links between the nodes) trains to the reference."""
    outdir = _on_emulated_cluster("ddp", tmp_root)
    weights = _weights(outdir, 4)
    for r in range(1, 4):
        for k in weights[0]:
            assert torch.equal(weights[r][k], weights[0][k]), f"rank {r} differs from rank 0 in {k}"
    ref, _ = model_common.reference(4, torch.optim.SGD, lr=0.1, momentum=0.9)
    _assert_close(weights[0], ref, "hoccl DDP on the emulated cluster vs the single-process reference")


def test_zero_redundancy_optimizer_on_emulated_cluster(tmp_root):
    """ZeroRedundancyOptimizer across 2 network namespaces x 2 ranks trains
    to the single-process reference, and consolidate_state_dict gathers
    every shard's Adam state on rank 0 over the network."""
    outdir = _on_emulated_cluster("zero", tmp_root)
    _assert_zero_matches_reference(outdir, 4)


@pytest.mark.parametrize("n", [2, 3])
def test_zero_redundancy_optimizer(n, tmp_root):
    outdir = os.path.join(tmp_root, f"zero{n}")
    codes, outputs, results = launch.launch("zero", n, outdir)
    assert codes == [0] * n, launch.describe(codes, outputs)
    _assert_zero_matches_reference(outdir, n)


def _assert_zero_matches_reference(outdir, n):
    ref_weights, ref_optim = model_common.reference(n, torch.optim.Adam, lr=0.01)
    weights = _weights(outdir, n)
    for r in range(n):
        _assert_close(weights[r], ref_weights, f"ZeRO rank {r} vs the reference")
    optim = torch.load(os.path.join(outdir, "optim.pt"))  # consolidated on rank 0
    assert len(optim["state"]) == len(ref_optim["state"])
    for i, want in ref_optim["state"].items():
        got = optim["state"][i]
        for key in ("exp_avg", "exp_avg_sq"):
            assert torch.allclose(got[key], want[key], rtol=1e-5, atol=1e-7), f"state {i} {key}"
        assert float(got["step"]) == float(want["step"]) == model_common.STEPS


@pytest.mark.parametrize("n", [2, 3])
def test_killed_rank_raises_naming_it(n, tmp_root):
    timeout_s = 20
    codes, outputs, results = launch.launch("kill", n, os.path.join(tmp_root, f"kill{n}"), timeout_s=timeout_s,
                                            limit_s=120)
    assert codes[-1] != 0, "the last rank was to be killed"
    for r in range(n - 1):
        assert results[r] is not None, launch.describe(codes, outputs)
        err = results[r]["error"]
        assert err, f"rank {r} did not raise"
        assert f"rank {n - 1}" in err, f"rank {r}'s error does not name rank {n - 1}: {err}"
        print(f"rank {r} raised {results[r]['seconds_after_last_success']:.2f} s after its last "
              f"all_reduce (timeout {timeout_s} s): {err}")


def test_p2p_size_mismatch_raises(tmp_root):
    codes, outputs, results = launch.launch("p2p_mismatch", 2, os.path.join(tmp_root, "p2p_mismatch"), timeout_s=10,
                                            limit_s=60)
    assert results[1] is not None, launch.describe(codes, outputs)
    err = results[1]["error"]
    assert err and "point-to-point mismatch" in err, f"the receiver's error: {err}"
    # The sender may return before the receiver looks, or raise itself.
    assert results[0] is not None, launch.describe(codes, outputs)


@pytest.mark.parametrize("count", [129, 300000])
def test_reduce_to_different_roots_raises_naming_them(count, tmp_root):
    # dist.reduce(t, dst=rank) on every rank: a mismatch hoccl names within a
    # second or so, not after the group's timeout (60 s here).
    codes, outputs, results = launch.launch("root_mismatch", 2, os.path.join(tmp_root, f"root_mismatch{count}"),
                                            timeout_s=60, limit_s=120,
                                            rank_env=lambda r: {"TEST_COUNT": str(count)})
    for r in range(2):
        assert results[r] is not None, launch.describe(codes, outputs)
        err = results[r]["error"]
        assert err and "collective mismatch" in err and "root=0" in err and "root=1" in err, f"rank {r}: {err}"
        assert results[r]["seconds"] < 30, f"rank {r} raised after {results[r]['seconds']:.1f} s: {err}"


def test_node_groups_two_emulated_nodes(tmp_root):
    # Ranks 2k and 2k+1 are node k: HOCCL_HOSTID is how hoccl tells nodes apart.
    n = 4
    codes, outputs, results = launch.launch("node_groups", n, os.path.join(tmp_root, "node_groups"),
                                            rank_env=lambda r: {"HOCCL_HOSTID": f"torch-test-node{r // 2}"})
    assert codes == [0] * n, launch.describe(codes, outputs)
    for r, res in enumerate(results):
        node, local = r // 2, r % 2
        assert res["intra"] == [local, 2], res
        assert res["rail"] == [node, 2], res
        assert res["intra_sum"] == (2 * node + 1) + (2 * node + 2), res
        assert res["rail_sum"] == (local + 1) + (2 + local + 1), res
        assert res["rail_bcast"] == 2 + local, res
        assert res["intra_members"] == [2 * node, 2 * node + 1], res


@pytest.mark.parametrize("n", [1, 2, 4])
def test_p2p_in_any_order(n, tmp_root):
    """isend/irecv posted with pauses in between, in orders that deadlock if
    each runs alone as soon as it is posted (every rank sends first in a
    ring; shuffled sends and receives to and from every rank), completed by
    wait, is_completed polling, the future, a blocking recv and
    batch_isend_irecv."""
    codes, outputs, results = launch.launch("p2p_order", n, os.path.join(tmp_root, f"p2p_order{n}"), timeout_s=15,
                                            limit_s=150)
    if any(r is None for r in results):
        pytest.fail(f"a rank did not finish:\n{launch.describe(codes, outputs)}")
    errors = {(r["rank"], case): err for r in results for case, err in r["cases"].items() if err}
    assert not errors, "\n".join(f"rank {r}, {case}: {err}" for (r, case), err in errors.items())
    assert codes == [0] * n, launch.describe(codes, outputs)


def test_per_call_timeout_raises_naming_the_op(tmp_root):
    """Rank 1 never joins rank 0's all-reduces: a timeout in the call's
    options (also for a call queued behind one that waits for rank 1), and
    Work.wait(timeout), raise on rank 0 before the group's timeout, naming
    the op; the group they ran on is aborted (its other calls raise), the
    default group still works."""
    group_timeout_s = 30
    codes, outputs, results = launch.launch("call_timeout", 2, os.path.join(tmp_root, "call_timeout"),
                                            timeout_s=group_timeout_s, limit_s=150)
    assert results[0] is not None and results[1] is not None, launch.describe(codes, outputs)
    r0 = results[0]
    for case in ("opts", "wait", "queued"):
        err = r0[f"{case}_error"]
        assert err, f"{case}: no error"
        assert "ALLREDUCE" in err and "1000 ms" in err, f"{case}: the error names neither the op nor the time: {err}"
        # Raised by the call's own bound, not by the group's timeout.
        assert r0[f"{case}_seconds"] < group_timeout_s / 2, f"{case}: raised after {r0[f'{case}_seconds']:.1f} s"
        other = r0[f"{case}_other_error"]
        assert other and "abort" in other, f"{case}: another call on the timed-out group: {other}"
    assert [r["world_sum"] for r in results] == [2, 2]


def test_bench_ddp_prints_the_side_by_side_table(tmp_root):
    """The DDP benchmark (examples/bench_ddp.py) runs both backends and the
    no-communication floor, and prints a row of positive step times."""
    import subprocess
    import sys
    bench = os.path.join(HERE, "..", "examples", "bench_ddp.py")
    plot = os.path.join(tmp_root, "ddp.png")
    out = subprocess.run([sys.executable, bench, "--nproc", "2", "--floor", "--width", "32", "--depth", "2",
                          "--batch", "2", "--steps", "3", "--warmup", "1", "--plot", plot],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| 2 processes |")]
    assert len(rows) == 1, out.stdout
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    steps = [float(c) for c in cells[1:4]]  # no comm, gloo, hoccl
    assert all(s > 0 for s in steps), rows[0]
    # The ratio comes from the unrounded times; the cells are rounded to 0.1 ms.
    low, high = (steps[2] - 0.05) / (steps[1] + 0.05), (steps[2] + 0.05) / (steps[1] - 0.05)
    assert low - 0.005 <= float(cells[4]) <= high + 0.005, rows[0]
    assert os.path.getsize(plot) > 0
