"""hoccl as a torch.distributed backend.

    import hoccl_torch                      # registers the backend "hoccl"
    import torch.distributed as dist
    dist.init_process_group("hoccl")        # env:// rendezvous, as for gloo

Every process group (the default one and each ``new_group``) is one hoccl
communicator. Group rank 0 creates its unique id and publishes it in the
c10d store torch hands over; the process group's timeout becomes hoccl's
timeout (hocclConfig_t.timeoutMs), so a dead or stuck peer makes the
others raise within it. ``Options(algorithm="horing")`` passed as
``pg_options`` picks hoccl's algorithm for one group (default: HOCCL_ALGO,
else hoccl's choice).

Tensors are CPU tensors; ops SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM
(torch.distributed._make_nccl_premul_sum). Supported: all_reduce, all_reduce_coalesced,
broadcast, reduce, all_gather, all_gather_into_tensor, reduce_scatter,
reduce_scatter_tensor, barrier, all_to_all_single (hocclAlltoAll when the
splits are equal, else hocclAlltoAllv), all_to_all, gather and scatter (one
hoccl group of hocclSend/hocclRecv), send, recv, isend, irecv.

Point to point: hoccl has no tags, so ``tag`` is ignored (as by the NCCL
backend); the k-th send from a to b meets b's k-th receive from a, and both
sides must agree on size and dtype (else both raise with hoccl's
"point-to-point mismatch" message). ``recv`` without ``src`` (receive from
any source) raises.

``isend`` and ``irecv`` (and ``batch_isend_irecv``) may be posted in any
order on every rank: the backend holds them back, not started, until
something needs them, then runs all those it holds in one
hocclGroupStart/End, where no order can deadlock. What starts them: waiting
on any of their works (``wait``, ``is_completed``, ``get_future``), a
collective or barrier called on the group after them (it runs after them),
or the group's destruction. A blocking ``send`` or ``recv`` is an isend or
irecv waited on at once, so it runs with what is held before it:
``isend(a); recv(b)`` is safe. What still waits, as with MPI: two ranks
that each wait on a send to the other (a blocking ``send``, or an
``isend`` waited on) before posting the receive the other needs, since a
send may wait for its receiver until the timeout. Sends to oneself work
when the isend and the irecv are both posted before either is waited on.
A work nobody waits on does not start by itself: wait on (or poll) a send
before blocking outside this group (another group, the store) on the peer
that needs it.

Timeouts: hoccl bounds every wait by the group's timeout (the ``timeout``
of init_process_group / new_group). A per-call ``timeout`` in c10d's
options (e.g. ``AllreduceOptions.timeout`` passed to the process group's
method) and ``Work.wait(timeout)`` are honoured too: when the call has not
completed in time (the options' timeout counts from the call, wait's from
the wait), it raises a RuntimeError naming the op and the time, and the
group's communicator is aborted (hocclCommAbort, as ProcessGroupNCCL's
``wait(timeout)`` does), so that no call is left waiting for the missing
ranks; the group's other calls raise, other groups are unaffected.
torch 1.13's ``monitored_barrier`` takes only the gloo backend.

``node_groups(group)`` splits a hoccl group into the ranks of this rank's
node and this rank's rail (the ranks with the same local index on every
node), with hocclCommSplit; both are ordinary process groups for
``group=``. Nodes are hoccl's (HOCCL_HOSTID, HOCCL_TOPO_FILE).
"""
import atexit
import datetime

import torch  # noqa: F401  (loads libtorch before the extension)
import torch.distributed as dist

from ._C import ProcessGroupHoccl, _stop_all_workers, hoccl_version

# Groups that are still alive at exit (an optimizer or a module can keep one
# after destroy_process_group) must stop their worker threads before the
# interpreter finalises: a worker freeing a tensor then would be killed
# taking the GIL, and the process would abort.
atexit.register(_stop_all_workers)

__all__ = ["ProcessGroupHoccl", "Options", "abort", "shutdown", "shrink", "backend_of", "node_groups",
           "hoccl_version", "TORCH2"]

BACKEND = "hoccl"


# torch 2.x: the extension is a c10d::Backend, which torch wraps in a
# ProcessGroup per device type; torch 1.13: it is the ProcessGroup.
TORCH2 = ProcessGroupHoccl.torch_api >= 2


class Options:
    """``pg_options`` for ``init_process_group`` / ``new_group`` with backend "hoccl".

    algorithm: "auto", "ring", "hierarchical", "horing" or "doubling"
    (every rank of the group must pass the same), or None for HOCCL_ALGO.
    """

    def __init__(self, algorithm=None):
        self.algorithm = algorithm


def backend_of(group=None):
    """The ProcessGroupHoccl behind a process group (default: the default
    group), or None if the group is not a hoccl group."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if isinstance(pg, ProcessGroupHoccl):
        return pg
    if TORCH2:
        try:
            b = pg._get_backend(torch.device("cpu"))
        except RuntimeError:
            return None
        return b if isinstance(b, ProcessGroupHoccl) else None
    return None


def _world_backend():
    """The default group's ProcessGroupHoccl, or None (no default group
    yet, or it is not hoccl's)."""
    if not dist.is_initialized():
        return None
    return backend_of(dist.distributed_c10d._get_default_group())


def _create(backend_opts, pg_options):
    algorithm = getattr(pg_options, "algorithm", None) or ""
    timeout = backend_opts.timeout
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    members = list(getattr(backend_opts, "global_ranks_in_group", None) or [])
    world = _world_backend()
    if world is not None and members:
        # A subgroup (new_group, DeviceMesh): made from the world's
        # communicator by its members alone (hocclCommCreateGroup), no
        # rendezvous. The default group's ranks are the global ranks.
        return world._create_group(members, float(timeout), str(backend_opts.group_id), algorithm)
    return ProcessGroupHoccl(backend_opts.store, backend_opts.group_rank, backend_opts.group_size,
                             float(timeout), str(backend_opts.group_id), algorithm)


def _register():
    # register_backend asserts on a second registration (a reload, or
    # another copy of this package): register once.
    if BACKEND.upper() in dist.Backend._plugins:
        return
    if TORCH2:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True, devices=["cpu"])
    else:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True)


def _hoccl_backend(group, what):
    b = backend_of(group)
    if b is None:
        raise RuntimeError(f"hoccl: {what}: the group is not a hoccl process group")
    return b


def abort(group=None):
    """hocclCommAbort on a hoccl process group (default: the default group):
    running and queued work fails, the peers are told, later calls raise."""
    _hoccl_backend(group, "abort").abort()


def shutdown(group=None):
    """Finishes a hoccl group's queued work, then destroys its communicator
    (hocclCommDestroy); later calls on it raise. destroy_process_group does
    this too once the group is no longer referenced."""
    _hoccl_backend(group, "shutdown").shutdown()


def shrink(ranks, group=None, abort=True, group_name=None):
    """A process group of `group`'s ranks (default: the default group) minus
    the global ranks `ranks`, made from its communicator by the survivors
    alone (hocclCommShrink): no store, no rendezvous, no new unique id. Every
    surviving rank of `group` calls it with the same `ranks`; the excluded
    ranks do not call it and may be dead, frozen or gone.

    abort=True (HOCCL_SHRINK_ABORT, the mode after a failure): a call of
    `group` still waiting for an excluded rank fails now, and `group` runs
    no more collectives (destroy it when done). abort=False: in program
    order after `group`'s queued work; `group` stays usable.

    Returns the new group, to pass as ``group=`` / ``process_group=``;
    its ranks are the survivors in their old order, renumbered from 0.
    Raises ValueError for a rank not in `group`, listed twice, or this
    rank itself, and RuntimeError with hoccl's message when the survivors
    disagree or `group` was aborted (shrink before aborting it)."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    b = _hoccl_backend(pg, "shrink")
    _, pg_names, pg_group_ranks = _world_state()
    to_group = pg_group_ranks[pg]
    excluded = []
    for g in ranks:
        if g not in to_group:
            raise ValueError(f"hoccl: shrink: rank {g} is not a member of the group")
        if to_group[g] in excluded:
            raise ValueError(f"hoccl: shrink: rank {g} is listed twice")
        excluded.append(to_group[g])
    if b.rank() in excluded:
        raise ValueError(f"hoccl: shrink: this rank ({dist.get_rank()}) is in the list; excluded ranks do not call it")
    survivors = [g for g, _ in sorted(to_group.items(), key=lambda kv: kv[1]) if to_group[g] not in excluded]
    if group_name is None:
        base = pg_names.get(pg, "") or "default"
        _shrink_count[base] = _shrink_count.get(base, 0) + 1
        group_name = f"{base}/shrink{_shrink_count[base]}"
    new = b._shrink(excluded, bool(abort), group_name)
    return _register_group(new, pg, survivors, group_name)


_shrink_count = {}


def _world_state():
    """torch.distributed's group tables: (pg_map, pg_names, pg_group_ranks)."""
    c10d = dist.distributed_c10d
    if hasattr(c10d, "_world"):
        w = c10d._world
        return w.pg_map, w.pg_names, w.pg_group_ranks
    return c10d._pg_map, c10d._pg_names, c10d._pg_group_ranks


def _register_group(backend, parent, members, name):
    """Enters a ProcessGroupHoccl (its ranks: global ranks `members`, in
    group-rank order) in torch.distributed's bookkeeping as new_group does,
    so that it works as ``group=`` in torch.distributed's calls and in
    destroy_process_group. Returns the group to pass as ``group=``."""
    c10d = dist.distributed_c10d
    pg_map, pg_names, pg_group_ranks = _world_state()
    store = pg_map[parent][1]
    pg = backend
    if TORCH2:
        # Wrapped in a ProcessGroup for the CPU, as torch wraps what a
        # backend's creator returns.
        PG = c10d.ProcessGroup
        prefix = c10d.PrefixStore(f"{name}/", store)
        pg = PG(prefix, backend.rank(), backend.size())
        pg._set_default_backend(PG.BackendType.CUSTOM)
        pg._register_backend(torch.device("cpu"), PG.BackendType.CUSTOM, backend)
        pg._set_group_name(name)
        pg._set_group_desc(name)
        c10d._register_process_group(name, pg)
        c10d._world.pg_backend_config[pg] = "cpu:" + BACKEND
        tag = f"ptd:{name}"
        c10d._world.tags_to_pg.setdefault("", []).append(pg)
        c10d._world.tags_to_pg.setdefault(tag, []).append(pg)
        c10d._world.pg_to_tag[pg] = tag
    pg_map[pg] = (dist.Backend(BACKEND), store)
    pg_names[pg] = name
    pg_group_ranks[pg] = {g: i for i, g in enumerate(members)}
    return pg


def node_groups(group=None):
    """Returns (intra_node_group, rail_group) for this rank, made with
    hocclCommSplit on `group`'s communicator (default: the default group).

    The intra-node group holds the ranks of `group` on this rank's node, in
    group-rank order; the rail group holds the ranks with this rank's local
    index, one per node, in node order. Every rank of `group` must call it
    (it is a collective on `group`)."""
    intra, rail, _ = _node_groups(group)
    return intra, rail


def _node_groups(group):
    """node_groups, plus every rank's [node, local index, ranks on its node]
    in group-rank order."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    b = _hoccl_backend(pg, "node_groups")
    _, pg_names, pg_group_ranks = _world_state()
    to_global = {i: g for g, i in pg_group_ranks[pg].items()}
    node, nnodes, local_rank, local_ranks = b._node_info()
    # Every rank's place, to name the members of both groups.
    mine = torch.tensor([node, local_rank, local_ranks], dtype=torch.int64)
    everyone = torch.empty(3 * b.size(), dtype=torch.int64)
    b._allgather_base(everyone, mine).wait()
    where = everyone.view(-1, 3).tolist()
    base = pg_names.get(pg, "") or "default"
    intra_name = f"{base}/node{node}"
    rail_name = f"{base}/rail{local_rank}"
    intra = b._split(node, b.rank(), intra_name)
    rail = b._split(local_rank, node, rail_name)
    intra_members = [to_global[i] for i in range(b.size()) if where[i][0] == node]
    rail_members = [to_global[i] for i in sorted((i for i in range(b.size()) if where[i][1] == local_rank),
                                                 key=lambda i: where[i][0])]
    intra = _register_group(intra, pg, intra_members, intra_name)
    rail = _register_group(rail, pg, rail_members, rail_name)
    return intra, rail, where


_register()
