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

__all__ = ["ProcessGroupHoccl", "Options", "abort", "node_groups", "hoccl_version"]

BACKEND = "hoccl"


class Options:
    """``pg_options`` for ``init_process_group`` / ``new_group`` with backend "hoccl".

    algorithm: "auto", "ring", "hierarchical", "horing" or "doubling"
    (every rank of the group must pass the same), or None for HOCCL_ALGO.
    """

    def __init__(self, algorithm=None):
        self.algorithm = algorithm


def _create(backend_opts, pg_options):
    algorithm = getattr(pg_options, "algorithm", None) or ""
    timeout = backend_opts.timeout
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    return ProcessGroupHoccl(backend_opts.store, backend_opts.group_rank, backend_opts.group_size,
                             float(timeout), str(backend_opts.group_id), algorithm)


def _register():
    # register_backend asserts on a second registration (a reload, or
    # another copy of this package): register once.
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True)


def abort(group=None):
    """hocclCommAbort on a hoccl process group (default: the default group):
    running and queued work fails, the peers are told, later calls raise."""
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    if not isinstance(pg, ProcessGroupHoccl):
        raise RuntimeError("hoccl: abort: the group is not a hoccl process group")
    pg.abort()


def _register_group(pg, parent, members, name):
    """Enters pg (its ranks: global ranks `members`, in group-rank order)
    in torch.distributed's bookkeeping as new_group does, so that it works
    as ``group=`` in torch.distributed's calls and in destroy_process_group."""
    c10d = dist.distributed_c10d
    store = c10d._pg_map[parent][1]
    c10d._pg_map[pg] = (dist.Backend(BACKEND), store)
    c10d._pg_names[pg] = name
    c10d._pg_group_ranks[pg] = {g: i for i, g in enumerate(members)}


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
    if not isinstance(pg, ProcessGroupHoccl):
        raise RuntimeError("hoccl: node_groups: the group is not a hoccl process group")
    c10d = dist.distributed_c10d
    to_global = {i: g for g, i in c10d._pg_group_ranks[pg].items()}
    node, nnodes, local_rank, local_ranks = pg._node_info()
    # Every rank's place, to name the members of both groups.
    mine = torch.tensor([node, local_rank, local_ranks], dtype=torch.int64)
    everyone = torch.empty(3 * pg.size(), dtype=torch.int64)
    pg._allgather_base(everyone, mine).wait()
    where = everyone.view(-1, 3).tolist()
    base = c10d._pg_names.get(pg, "") or "default"
    intra_name = f"{base}/node{node}"
    rail_name = f"{base}/rail{local_rank}"
    intra = pg._split(node, pg.rank(), intra_name)
    rail = pg._split(local_rank, node, rail_name)
    intra_members = [to_global[i] for i in range(pg.size()) if where[i][0] == node]
    rail_members = [to_global[i] for i in sorted((i for i in range(pg.size()) if where[i][1] == local_rank),
                                                 key=lambda i: where[i][0])]
    _register_group(intra, pg, intra_members, intra_name)
    _register_group(rail, pg, rail_members, rail_name)
    return intra, rail, where


_register()
