"""The "shrink" scenario of worker.py: the last rank leaves (it never calls
shrink), and the others make a group without it (hoccl_torch.shrink with
abort=False: the world group stays usable) and check it: its size and
ranks, the arguments it refuses, and collectives on it. Writes what
test_shrink.py checks.
"""
import torch
import torch.distributed as dist

import hoccl_torch


def raises(fn, exc, *words):
    try:
        fn()
    except exc as e:
        missing = [w for w in words if w not in str(e)]
        return f"message lacks {missing}: {e}" if missing else None
    return f"no {exc.__name__}"


def run(out, rank, world):
    leaver = world - 1
    out["left"] = rank == leaver
    if rank == leaver:
        return
    errors = {
        "self": raises(lambda: hoccl_torch.shrink([rank]), ValueError, "this rank"),
        "twice": raises(lambda: hoccl_torch.shrink([leaver, leaver]), ValueError, "twice"),
        "not_a_member": raises(lambda: hoccl_torch.shrink([world + 5]), ValueError, "not a member"),
    }
    g = hoccl_torch.shrink([leaver], abort=False)
    out["errors"] = {k: v for k, v in errors.items() if v}
    out["group_rank"], out["group_size"] = g.rank(), g.size()
    out["global_ranks"] = dist.get_process_group_ranks(g) if hasattr(dist, "get_process_group_ranks") else None
    out["origin"] = hoccl_torch.backend_of(g).origin
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t, group=g)
    out["all_reduce"] = t.tolist()
    parts = [torch.zeros(2) for _ in range(g.size())]
    dist.all_gather(parts, torch.full((2,), float(rank)), group=g)
    out["all_gather"] = [p.tolist() for p in parts]
    b = torch.tensor([float(rank * 10)])
    dist.broadcast(b, src=1, group=g)  # global rank 1 (the group's rank 1)
    out["broadcast"] = b.item()
    dist.barrier(group=g)
