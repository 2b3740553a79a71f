"""hoccl as a torch.distributed backend.

    import hoccl_torch                      # registers the backend "hoccl"
    import torch.distributed as dist
    dist.init_process_group("hoccl")        # env:// rendezvous, as for gloo

Every process group (the default one and each ``new_group``) is one hoccl
communicator. Group rank 0 creates its unique id and publishes it in the
c10d store torch hands over; the process group's timeout becomes hoccl's
timeout (hocclConfig_t.timeoutSec), so a dead or stuck peer makes the
others raise within it. ``Options(algorithm="horing")`` passed as
``pg_options`` picks hoccl's algorithm for one group (default: HOCCL_ALGO,
else hoccl's choice).

Tensors are CPU tensors; ops SUM, AVG, PRODUCT, MIN, MAX and PREMUL_SUM
(torch.distributed._make_nccl_premul_sum). Supported: all_reduce, all_reduce_coalesced,
broadcast, reduce, all_gather, all_gather_into_tensor, reduce_scatter,
reduce_scatter_tensor, barrier; gather, scatter, all_to_all and
all_to_all_single through all-gather / broadcast (correct, but they move
n times the bytes of a point-to-point version). send and recv raise until
hoccl's C API has point-to-point calls.
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

__all__ = ["ProcessGroupHoccl", "Options", "abort", "hoccl_version"]

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


_register()
