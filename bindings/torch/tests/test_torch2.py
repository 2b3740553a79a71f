"""What torch 2.x adds on top of the methods test_backend.py checks: a 2-D
DeviceMesh on CPU whose dimensions are hoccl's node and rail groups,
DTensor redistributions on it, and a tensor-parallel MLP that trains to the
single-process reference weights; on one node (4 ranks) and on 2 emulated
nodes of 2 ranks. torch 1.13 has none of these (tools/torch2-check.sh runs
this file under Debian 13's torch 2.6).
"""
import os

import pytest
import torch

import hoccl_torch
import launch
import mesh_scenario

pytestmark = pytest.mark.skipif(not hoccl_torch.TORCH2,
                                reason=f"torch {torch.__version__}: DeviceMesh and DTensor need torch 2.x "
                                       "(tools/torch2-check.sh runs these under torch 2.6)")

SHAPES = {"1x4": (1, 4), "2x2": (2, 2)}


@pytest.fixture(scope="module")
def tmp_root(tmp_path_factory):
    return str(tmp_path_factory.mktemp("hoccl_torch2"))


_runs = {}


def mesh_run(shape, tmp_root):
    if shape not in _runs:
        nodes, per = SHAPES[shape]
        n = nodes * per
        outdir = os.path.join(tmp_root, f"mesh{shape}")
        _runs[shape] = (n, outdir) + launch.launch(
            "mesh", n, outdir, timeout_s=60, limit_s=300,
            rank_env=lambda r: {"HOCCL_HOSTID": f"torch2-node{r // per}", "TEST_NODES": str(nodes)})
    return _runs[shape]


@pytest.mark.parametrize("shape", SHAPES)
def test_mesh_dimensions_are_hoccls_node_and_rail_groups(shape, tmp_root):
    n, _, codes, outputs, results = mesh_run(shape, tmp_root)
    assert codes == [0] * n, launch.describe(codes, outputs)
    nodes, per = SHAPES[shape]
    for r, res in enumerate(results):
        node, local = r // per, r % per
        g = res["groups"]
        assert g["local"]["ranks"] == [node * per + j for j in range(per)], g
        assert g["node"]["ranks"] == [i * per + local for i in range(nodes)], g
        assert g["local"]["node_info"][:2] == [node, nodes], g  # hoccl's nodes agree
        for dim in ("node", "local"):
            # Made from the world communicator by its members, not a rendezvous.
            assert g[dim]["origin"] == "create_group", g


@pytest.mark.parametrize("shape", SHAPES)
def test_dtensor_redistribute_gives_the_reference_values(shape, tmp_root):
    n, _, codes, outputs, results = mesh_run(shape, tmp_root)
    assert codes == [0] * n, launch.describe(codes, outputs)
    for r, res in enumerate(results):
        wrong = [k for k, ok in res["dtensor"].items() if not ok]
        assert not wrong, f"rank {r}: {wrong} differ from the values computed in one process"
        assert len(res["dtensor"]) == 9, res["dtensor"]


@pytest.mark.parametrize("shape", SHAPES)
def test_tensor_parallel_mlp_trains_to_the_reference_weights(shape, tmp_root):
    n, outdir, codes, outputs, results = mesh_run(shape, tmp_root)
    assert codes == [0] * n, launch.describe(codes, outputs)
    ref = mesh_scenario.reference_weights()
    for r in range(n):
        got = torch.load(os.path.join(outdir, f"tp_weights{r}.pt"))
        assert set(got) == set(ref)
        for k in ref:
            assert torch.allclose(got[k], ref[k], rtol=1e-5, atol=1e-6), \
                f"rank {r}: {k} differs by {(got[k] - ref[k]).abs().max().item()}"
        # The run moved the weights: a check that cannot pass by doing nothing.
        assert not torch.allclose(ref["fc1.weight"], mesh_scenario.MLP().fc1.weight.detach())
