"""Going on without a lost rank (hoccl_torch.shrink, hocclCommShrink): a
rank that leaves, checked method by method, and the DDP example that kills
a rank mid-training and finishes on the survivors with the weights of a
reference run from the same checkpoint (on one node, and with the killed
rank on another emulated node).
"""
import json
import os
import subprocess
import sys

import pytest

import launch

EXAMPLE = os.path.join(os.path.dirname(launch.HERE), "examples", "ddp_shrink.py")


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("hoccl_shrink"))


def test_a_rank_that_leaves_is_shrunk_away(tmp_root):
    n = 4
    codes, outputs, results = launch.launch("shrink", n, os.path.join(tmp_root, "leave"))
    assert codes == [0] * n, launch.describe(codes, outputs)
    for r, res in enumerate(results[:-1]):
        assert res["errors"] == {}, f"rank {r}: {res['errors']}"
        assert (res["group_rank"], res["group_size"]) == (r, n - 1)
        if res["global_ranks"] is not None:
            assert res["global_ranks"] == list(range(n - 1))
        assert res["origin"] == "shrink"
        assert res["all_reduce"] == [float(sum(range(1, n)))] * 5
        assert res["all_gather"] == [[float(i)] * 2 for i in range(n - 1)]
        assert res["broadcast"] == 10.0
    assert results[-1]["left"]


@pytest.mark.parametrize("nodes", [1, 4])
def test_ddp_survives_a_killed_rank(nodes, tmp_root):
    out = os.path.join(tmp_root, f"ddp{nodes}")
    run = subprocess.run([sys.executable, EXAMPLE, "--nproc", "4", "--kill-rank", "3", "--kill-step", "12",
                          "--nodes", str(nodes), "--limit", "240", "--dir", out],
                         capture_output=True, text=True, timeout=600)
    text = run.stdout + run.stderr
    assert run.returncode == 0, text[-4000:]
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["equal"] and summary["max_abs_diff"] == 0.0, summary
    assert summary["resumed_from_checkpoint"] == 10
    # Every survivor's failed step names the killed rank.
    failed = [line for line in text.splitlines() if "a step failed" in line]
    assert len(failed) == 3 and all("rank 3" in line for line in failed), text[-4000:]
