"""The "mesh" scenario of worker.py (torch 2.x): a 2-D DeviceMesh on CPU
over hoccl, DTensor redistributions on both of its dimensions, and a
tensor-parallel MLP trained for 10 steps. Writes what test_torch2.py
compares with values computed in one process.

Environment: TEST_NODES (the mesh's first dimension: nodes; the test sets
HOCCL_HOSTID so that ranks n*per .. n*per+per-1 are node n).
"""
import os

import torch
import torch.distributed as dist
import torch.nn as nn

import hoccl_torch

STEPS = 10
LR = 0.05


def global_tensor(rows, cols):
    """The same tensor on every rank (and in the test)."""
    return torch.arange(rows * cols, dtype=torch.float32).reshape(rows, cols) / 7.0


class MLP(nn.Module):
    def __init__(self, width=8, hidden=16):
        super().__init__()
        torch.manual_seed(1234)
        self.fc1 = nn.Linear(width, hidden)
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def batch(step, width=8):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(4, width, generator=g), torch.randn(4, width, generator=g)


def train(model):
    """STEPS steps of SGD on the same batches, in one process or in parallel."""
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(STEPS):
        x, y = batch(step)
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def reference_weights():
    """The MLP trained in one process: what tensor parallelism must give."""
    model = MLP()
    train(model)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def run(out, outdir, rank):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor, DTensor
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    n = dist.get_world_size()
    nodes = int(os.environ.get("TEST_NODES", "1"))
    per = n // nodes
    mesh = init_device_mesh("cpu", (nodes, per), mesh_dim_names=("node", "local"))
    # The dimensions are hoccl's groups: "local" the ranks of this node,
    # "node" this rank's rail (its local index on every node), each made
    # from the world's communicator by its members.
    groups = {}
    for dim in ("node", "local"):
        g = mesh.get_group(dim)
        b = hoccl_torch.backend_of(g)
        groups[dim] = {"origin": b.origin if b is not None else None,
                       "ranks": dist.get_process_group_ranks(g),
                       "node_info": hoccl_torch.backend_of()._node_info()}
    out["groups"] = groups

    # DTensor: shards on both dimensions, redistributions among Shard,
    # Replicate and Partial, each checked here against the global tensor.
    rows, cols = 4 * nodes, 6 * per
    full = global_tensor(rows, cols)
    checks = {}
    d = distribute_tensor(full, mesh, [Shard(0), Shard(1)])
    checks["shard_shard_local"] = torch.equal(d.to_local(), full.chunk(nodes, 0)[mesh.get_local_rank("node")]
                                              .chunk(per, 1)[mesh.get_local_rank("local")])
    checks["full_tensor"] = torch.equal(d.full_tensor(), full)
    r = d.redistribute(mesh, [Replicate(), Shard(0)])
    checks["replicate_shard0"] = torch.equal(r.to_local(), full.chunk(per, 0)[mesh.get_local_rank("local")])
    r = d.redistribute(mesh, [Shard(1), Replicate()])
    checks["shard1_replicate"] = torch.equal(r.to_local(), full.chunk(nodes, 1)[mesh.get_local_rank("node")])
    r = d.redistribute(mesh, [Replicate(), Replicate()])
    checks["replicate_replicate"] = torch.equal(r.to_local(), full)
    # Partial on each dimension: every rank holds full * (rank + 1); the sum
    # over a dimension is full times the sum of its ranks' (rank + 1).
    mine = full * (rank + 1)
    for dim, name in ((0, "node"), (1, "local")):
        placements = [Replicate(), Replicate()]
        placements[dim] = Partial()
        p = DTensor.from_local(mine, mesh, placements)
        summed = p.redistribute(mesh, [Replicate(), Replicate()]).to_local()
        weight = sum(rk + 1 for rk in dist.get_process_group_ranks(mesh.get_group(name)))
        checks[f"partial_{name}_to_replicate"] = torch.allclose(summed, full * weight)
        scattered = p.redistribute(mesh, [Shard(0) if dim == 0 else Replicate(),
                                          Shard(0) if dim == 1 else Replicate()]).to_local()
        size = nodes if dim == 0 else per
        checks[f"partial_{name}_to_shard"] = torch.allclose(
            scattered, (full * weight).chunk(size, 0)[mesh.get_local_rank(name)])
    out["dtensor"] = checks

    # A tensor-parallel MLP over all ranks (a 1-D mesh: across nodes where
    # there are several): fc1 split by columns, fc2 by rows.
    tp = init_device_mesh("cpu", (n,))
    model = MLP()
    parallelize_module(model, tp, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
    train(model)
    weights = {k: (v.full_tensor() if isinstance(v, DTensor) else v).detach().clone()
               for k, v in model.state_dict().items()}
    torch.save(weights, os.path.join(outdir, f"tp_weights{rank}.pt"))
    out["tp_done"] = True
