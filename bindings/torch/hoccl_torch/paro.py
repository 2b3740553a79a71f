"""PaRO: sharded data parallelism with partial redundancy, on hoccl groups.

    from hoccl_torch.paro import ParoDataParallel
    model = ParoDataParallel(net, lambda params: torch.optim.Adam(params, lr=1e-3),
                             strategy="NIG", accumulation_steps=4)
    for step in range(steps):
        for micro in range(4):
            loss_fn(model(x[micro]), y[micro]).backward()
        model.step()          # reduce, optimizer step, redistribute, zero

Each of parameters (p), gradients (g) and optimizer state (os) is kept
whole on every rank (N), sharded across the ranks of a node (I) or sharded
across all ranks (G). A strategy names the three levels:

    DDP NNN   ZeRO-1 NNG   ZeRO-2 NGG   ZeRO-3 GGG   MiCS III
    NIG       NII          IIG          IGG          ING

and the collectives follow from them (docs/paro.md has the table):
- every micro-step, p = I/G gathers a unit's parameters before its forward
  and again before its backward (all-gather on the node or on all ranks),
  and g = I/G reduce-scatters each unit's gradient as soon as backward has
  produced it (asynchronously, while backward goes on);
- at the accumulation boundary the gradient goes from its level to the
  optimizer state's: all-reduce on all ranks (N to N), reduce-scatter on
  all ranks (N to G), all-reduce on the rail (I to I: the ranks with this
  local index on every node) or reduce-scatter on the rail (I to G);
- after the optimizer step the updated shard goes back to the parameters'
  level: all-gather on the node (I to N), on all ranks (G to N) or on the
  rail (G to I).

Layout. Every unit (a module that owns parameters directly) has one flat
buffer, padded to a multiple of the world size n = N nodes x m ranks per
node. Shard levels nest: the node shard of local rank l is chunk l of m,
and the global shard of (node k, local rank l) is block k of that chunk
(block l * N + k); collectives on all ranks permute blocks to and from the
group's rank order where it differs. Only trainable parameters take part; frozen ones stay as they
are on every rank. Optimizers must be element-wise (SGD, Adam, AdamW...):
each rank's optimizer sees one flat fp32 master tensor per unit.

Parameters in bf16/fp16 keep an fp32 master copy in the optimizer state,
which is why state costs 4 + (optimizer's) bytes per parameter at the os
level; ``state_bytes()`` measures what a rank holds.
"""
import zlib

import torch
import torch.distributed as dist
import torch.nn as nn

LEVELS = "NIG"
STRATEGIES = {
    "DDP": "NNN", "ZeRO-1": "NNG", "ZeRO-2": "NGG", "ZeRO-3": "GGG", "MiCS": "III",
    "NIG": "NIG", "NII": "NII", "IIG": "IIG", "IGG": "IGG", "ING": "ING",
}
_GROUP_OF = {"I": "intra", "G": "world"}


def strategy_levels(strategy):
    """(p, g, os) levels of a strategy name ("NIG", "ZeRO-3", ...)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"hoccl paro: unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    return tuple(STRATEGIES[strategy])


class ParoGroups:
    """This rank's place (node k of N, local rank l of m) and the three
    groups: intra (its node), rail (its local index on every node, in node
    order) and world (the group itself). Made on every rank of a hoccl
    group at once (it splits the group)."""

    def __init__(self, group):
        from . import _node_groups, _world_state, backend_of
        pg = group if group is not None else dist.distributed_c10d._get_default_group()
        self.intra, self.rail, where = _node_groups(pg)  # raises for a group that is not hoccl's
        self.node, self.nnodes, self.local, self.nlocal = backend_of(pg)._node_info()
        if any(w[2] != self.nlocal for w in where):
            counts = sorted({w[2] for w in where})
            raise RuntimeError(f"hoccl paro: every node must have the same number of ranks (found {counts})")
        self.n = pg.size()
        # The world group is `pg` itself, in its own rank order (rings follow
        # rank order, and that order keeps a node's ranks together); a
        # global shard's place in the flat buffers is local index first
        # (block local * N + node), so G collectives permute blocks.
        self.world = pg
        self.world_root = {i: g for g, i in _world_state()[2][pg].items()}[0]
        self.rank_block = torch.tensor([w[1] * self.nnodes + w[0] for w in where], dtype=torch.int64)
        self.identity = bool(torch.equal(self.rank_block, torch.arange(self.n)))
        self.sizes = {"intra": self.nlocal, "rail": self.nnodes, "world": self.n}
        self.pgs = {"intra": self.intra, "rail": self.rail, "world": self.world}

    def to_rank_order(self, flat):
        """A flat buffer in block order (global shard s at block s) laid out
        in world-rank order (rank r's shard at block r): a copy, or `flat`."""
        if self.identity:
            return flat
        return flat.view(self.n, -1).index_select(0, self.rank_block).reshape(-1)

    def from_rank_order(self, ranked, out):
        """The inverse: writes `ranked` (world-rank order) into `out` (block order)."""
        if self.identity:
            if ranked.data_ptr() != out.data_ptr():
                out.copy_(ranked)
            return
        out.view(self.n, -1).index_copy_(0, self.rank_block, ranked.view(self.n, -1))

    def fraction(self, level):
        return {"N": 1, "I": self.nlocal, "G": self.n}[level]

    def shard_range(self, level, length):
        """[start, end) of this rank's shard at `level` in a flat buffer of `length`."""
        size = length // self.fraction(level)
        index = {"N": 0, "I": self.local, "G": self.local * self.nnodes + self.node}[level]
        return index * size, (index + 1) * size


class _Unit:
    """One module's trainable parameters as one flat, padded buffer."""

    def __init__(self, module, params, groups, levels):
        self.module, self.params = module, list(params)
        params = self.params
        self.dtype = params[0].dtype
        self.numels = [p.numel() for p in params]
        total = sum(self.numels)
        self.length = -(-total // groups.n) * groups.n  # padded to a multiple of n
        p_level, g_level, os_level = levels
        self.full = torch.zeros(self.length, dtype=self.dtype)
        off = 0
        with torch.no_grad():
            for p, k in zip(params, self.numels):
                self.full[off:off + k].copy_(p.reshape(-1))
                p.data = self.full[off:off + k].view_as(p)
                off += k
        self.p_range = groups.shard_range(p_level, self.length)
        self.g_range = groups.shard_range(g_level, self.length)
        self.os_range = groups.shard_range(os_level, self.length)
        self.p_shard = None if p_level == "N" else self.full[slice(*self.p_range)].clone()
        # Gradient storage between micro-steps. For p = g = N the parameters'
        # .grad are views of one flat buffer, so backward accumulates in place.
        self.g_acc = torch.zeros(self.g_range[1] - self.g_range[0], dtype=self.dtype)
        if p_level == "N" and g_level == "N":
            off = 0
            for p, k in zip(params, self.numels):
                p.grad = self.g_acc[off:off + k].view_as(p)
                off += k
        self.master = nn.Parameter(self.full[slice(*self.os_range)].detach().float().clone())
        self.gathered = p_level == "N"
        self.ready = set()      # parameters whose gradient backward has produced
        self.backward_gathered = False
        self.acc_nodes = []     # keeps the AccumulateGrad nodes (and so the hooks) alive

    def free(self):
        if self.full.storage().size() != 0:
            self.full.storage().resize_(0)
        self.gathered = False

    def flat_grad(self, scale):
        """The parameters' gradients as one padded flat tensor times `scale`
        (zeros for a parameter backward did not reach); drops the .grad."""
        flat = torch.zeros(self.length, dtype=self.dtype)
        off = 0
        for p, k in zip(self.params, self.numels):
            if p.grad is not None:
                flat[off:off + k].copy_(p.grad.reshape(-1))
            p.grad = None
            off += k
        return flat.mul_(scale)


class ParoDataParallel(nn.Module):
    """Wraps `module` for PaRO training on a hoccl process group.

    optimizer_factory(params) builds the optimizer over this rank's flat fp32
    master shards (an element-wise optimizer). strategy: one of STRATEGIES,
    or "auto": the one hoccl-paro recommends for this model on this group's
    nodes (self.advice holds its whole answer); advisor_args are its machine
    options (e.g. ["--node-gbit", "100", "--tune-file", "cluster.tune"]) and
    mem_gb the memory per rank for the training state.
    accumulation_steps: backward passes per step(); step() checks the count.
    group: a hoccl process group (default: the default group), or the
    ParoGroups made from one (to share its node, rail and world groups
    between wrappers); every rank of it must wrap an identical module with
    the same strategy. trace=True records every collective in self.trace as
    (phase, group, kind, numel),
    phase "micro", "boundary" or "step", numel the larger side's elements;
    collectives on one-rank groups are done locally and not recorded.
    """

    def __init__(self, module, optimizer_factory, strategy="NIG", accumulation_steps=1, group=None, trace=False,
                 advisor_args=(), mem_gb=None):
        super().__init__()
        if accumulation_steps < 1:
            raise ValueError(f"hoccl paro: accumulation_steps must be >= 1 (got {accumulation_steps})")
        if strategy != "auto":
            strategy_levels(strategy)  # a bad name fails before any collective
        self.module = module
        self.accumulation_steps = accumulation_steps
        self.groups = group if isinstance(group, ParoGroups) else ParoGroups(group)
        units = self._unit_params()
        self.advice = None
        if strategy == "auto":
            self.advice = advise(sum(p.numel() for _, _, ps in units for p in ps), accumulation_steps,
                                 units[0][2][0].dtype, len(units), self.groups, advisor_args, mem_gb)
            strategy = self.advice["recommended"]
        self.strategy = strategy
        self.levels = strategy_levels(strategy)
        self.trace = [] if trace else None
        self._phase = "init"
        self._micro = 0
        self._pending = []          # (unit, work, output) of asynchronous gradient reductions
        self._next = 0              # index in self._order of the next unit to reduce
        self._callback_queued = False
        self.units = [_Unit(mod, params, self.groups, self.levels) for _, mod, params in units]
        self._order = list(reversed(self.units))  # backward visits modules last to first
        self._check_same_model()
        self._install_hooks()  # before any storage is freed: the hooks make views of the parameters
        for unit in self.units:
            self._broadcast_initial(unit)
        self.optimizer = optimizer_factory([u.master for u in self.units])
        self._phase = "micro"

    # ---- set-up ---------------------------------------------------------------

    def _unit_params(self):
        """(module name, module, its trainable parameters) per unit."""
        seen, units = set(), []
        for name, mod in self.module.named_modules():
            params = [p for p in mod.parameters(recurse=False) if p.requires_grad]
            if any(id(p) in seen for p in params):
                raise RuntimeError(f"hoccl paro: module {name or '(root)'} shares a parameter with another "
                                   "module; shared (tied) parameters are not supported")
            seen.update(id(p) for p in params)
            dtypes = {p.dtype for p in params}
            if len(dtypes) > 1:
                raise RuntimeError(f"hoccl paro: module {name or '(root)'} has parameters of several dtypes "
                                   f"({', '.join(sorted(str(d) for d in dtypes))}); give each module one dtype")
            if params:
                units.append((name, mod, params))
        if not units:
            raise RuntimeError("hoccl paro: the module has no trainable parameters")
        return units

    def _check_same_model(self):
        dtypes = zlib.crc32(" ".join(str(u.dtype) for u in self.units).encode())
        shape = torch.tensor([len(self.units), sum(u.length for u in self.units), dtypes], dtype=torch.int64)
        lo, hi = shape.clone(), shape.clone()
        dist.all_reduce(lo, op=dist.ReduceOp.MIN, group=self.groups.world)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX, group=self.groups.world)
        if not torch.equal(lo, hi):
            raise RuntimeError("hoccl paro: the ranks wrap different models (units, padded elements, dtypes: "
                               f"this rank {shape.tolist()}, smallest {lo.tolist()}, largest {hi.tolist()})")

    def _broadcast_initial(self, unit):
        """Rank 0 of the world group's weights everywhere, then each rank's shards."""
        g = self.groups
        if g.n > 1:
            dist.broadcast(unit.full, src=g.world_root, group=g.world)
        with torch.no_grad():
            unit.master.copy_(unit.full[slice(*unit.os_range)].float())
            if unit.p_shard is not None:
                unit.p_shard.copy_(unit.full[slice(*unit.p_range)])
                unit.free()

    def _install_hooks(self):
        for unit in self.units:
            for p in unit.params:
                node = p.expand_as(p).grad_fn.next_functions[0][0]
                node.register_hook(self._grad_hook(unit, p))
                unit.acc_nodes.append(node)
            if self.levels[0] != "N":
                unit.module.register_forward_pre_hook(self._pre_forward(unit))
                unit.module.register_forward_hook(self._post_forward(unit))

    # ---- collectives ----------------------------------------------------------

    def _record(self, group, kind, numel):
        if self.trace is not None:
            self.trace.append((self._phase, group, kind, numel))

    def _all_gather(self, group, out, shard):
        if self.groups.sizes[group] == 1:
            out.copy_(shard)
            return
        self._record(group, "AG", out.numel())
        g = self.groups
        ranked = out if group != "world" or g.identity else torch.empty_like(out)
        dist.all_gather_into_tensor(ranked, shard, group=g.pgs[group])
        if ranked is not out:
            g.from_rank_order(ranked, out)

    def _reduce_scatter(self, group, out, inp, async_op=False):
        """Returns the work (None when done locally)."""
        if self.groups.sizes[group] == 1:
            out.copy_(inp)
            return None
        self._record(group, "RS", inp.numel())
        if group == "world":
            inp = self.groups.to_rank_order(inp)
        return dist.reduce_scatter_tensor(out, inp, group=self.groups.pgs[group], async_op=async_op)

    def _all_reduce(self, group, t, async_op=False):
        if self.groups.sizes[group] == 1:
            return None
        self._record(group, "AR", t.numel())
        return dist.all_reduce(t, group=self.groups.pgs[group], async_op=async_op)

    # ---- parameters -----------------------------------------------------------

    def _gather(self, unit):
        if unit.gathered:
            return
        unit.full.storage().resize_(unit.length)
        with torch.no_grad():
            self._all_gather(_GROUP_OF[self.levels[0]], unit.full, unit.p_shard)
        unit.gathered = True

    def _pre_forward(self, unit):
        def hook(module, inputs):
            self._gather(unit)
        return hook

    def _post_forward(self, unit):
        def hook(module, inputs, output):
            unit.free()
            if torch.is_grad_enabled():
                unit.backward_gathered = False
                _for_tensors(output, lambda t: t.register_hook(self._pre_backward(unit)) if t.requires_grad else None)
            return output
        return hook

    def _pre_backward(self, unit):
        def hook(grad):
            self._queue_callback()
            if not unit.backward_gathered:
                unit.backward_gathered = True
                self._gather(unit)
            return grad
        return hook

    # ---- gradients ------------------------------------------------------------

    def _queue_callback(self):
        if not self._callback_queued:
            self._callback_queued = True
            torch.autograd.Variable._execution_engine.queue_callback(self._end_of_backward)

    def _grad_hook(self, unit, p):
        def hook(*unused):
            self._queue_callback()
            unit.ready.add(id(p))
            if len(unit.ready) == len(unit.params):
                self._release_ready()
        return hook

    def _release_ready(self, final=False):
        """Takes the gradients of units in the fixed order (the same on every
        rank, whatever order backward finished them in); `final` takes the
        rest too, with zeros for gradients backward did not produce."""
        while self._next < len(self._order):
            unit = self._order[self._next]
            if not final and len(unit.ready) < len(unit.params):
                return
            self._take_gradient(unit)
            self._next += 1

    def _take_gradient(self, unit):
        p_level, g_level, _ = self.levels
        unit.ready.clear()
        if p_level == "N" and g_level == "N":
            return  # accumulated in place in g_acc
        flat = unit.flat_grad(1.0 / self.groups.n)
        if p_level != "N":
            unit.free()
        if g_level == "N":
            unit.g_acc.add_(flat)
            return
        out = torch.empty_like(unit.g_acc)
        work = self._reduce_scatter(_GROUP_OF[g_level], out, flat, async_op=True)
        self._pending.append((unit, work, out))  # the backend holds the input until the work is done

    def _end_of_backward(self):
        self._release_ready(final=True)
        for unit, work, out in self._pending:
            if work is not None:
                work.wait()
            unit.g_acc.add_(out)
        self._pending.clear()
        self._next = 0
        self._callback_queued = False
        self._micro += 1

    # ---- the step -------------------------------------------------------------

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    @torch.no_grad()
    def step(self):
        """After accumulation_steps backward passes: reduces the gradients to
        the optimizer state's shard, steps the optimizer, brings the updated
        parameters back to their level and clears the gradients."""
        if self._micro != self.accumulation_steps:
            raise RuntimeError(f"hoccl paro: step() after {self._micro} backward passes; "
                               f"accumulation_steps is {self.accumulation_steps}")
        p_level, g_level, os_level = self.levels
        n = self.groups.n
        self._phase = "boundary"
        for unit in self.units:
            unit.master.grad = self._boundary_gradient(unit, g_level, os_level, n).float()
        self._phase = "step"
        self.optimizer.step()
        for unit in self.units:
            self._distribute(unit, p_level, os_level)
            unit.master.grad = None
            unit.g_acc.zero_()
        self._micro = 0
        self._phase = "micro"

    def _boundary_gradient(self, unit, g_level, os_level, n):
        g = unit.g_acc
        if self.levels[0] == "N" and g_level == "N":
            g = g / n  # backward accumulated the raw gradients
        if g_level == os_level:
            # Same shard size: sum over the ranks holding the same shard.
            group = {"N": "world", "I": "rail", "G": None}[g_level]
            if group is not None:
                self._all_reduce(group, g)  # in place: g_acc is cleared after the step anyway
            return g
        out = torch.empty(unit.os_range[1] - unit.os_range[0], dtype=g.dtype)
        if (g_level, os_level) == ("N", "G"):
            self._reduce_scatter("world", out, g)
        elif (g_level, os_level) == ("I", "G"):
            self._reduce_scatter("rail", out, g)
        else:
            raise RuntimeError(f"hoccl paro: no gradient path from level {g_level} to {os_level}")
        return out

    def _distribute(self, unit, p_level, os_level):
        value = unit.master.detach().to(unit.dtype)
        if p_level == os_level:
            (unit.full if p_level == "N" else unit.p_shard).copy_(value)
        elif p_level == "N":
            self._all_gather(_GROUP_OF[os_level], unit.full, value)
        elif (p_level, os_level) == ("I", "G"):
            self._all_gather("rail", unit.p_shard, value)
        else:
            raise RuntimeError(f"hoccl paro: no parameter path from level {os_level} to {p_level}")

    # ---- memory and checkpoints -------------------------------------------------

    def state_bytes(self):
        """Bytes this rank holds between steps, by kind: parameters (the
        persistent copy or shard), gradients (the accumulation buffer, and any
        .grad left on a parameter), optimizer (fp32 masters and the
        optimizer's per-element state)."""
        params = grads = optim = 0
        for unit in self.units:
            params += unit.full.storage().size() * unit.full.element_size()
            if unit.p_shard is not None:
                params += unit.p_shard.numel() * unit.p_shard.element_size()
            grads += unit.g_acc.numel() * unit.g_acc.element_size()
            if not (self.levels[0] == "N" and self.levels[1] == "N"):
                grads += sum(p.grad.numel() * p.grad.element_size() for p in unit.params if p.grad is not None)
            optim += unit.master.numel() * unit.master.element_size()
            for value in self.optimizer.state.get(unit.master, {}).values():
                if _is_per_element(value, unit.master.numel()):
                    optim += value.numel() * value.element_size()
        return {"parameters": params, "gradients": grads, "optimizer": optim, "total": params + grads + optim}

    def _gather_level(self, level, shard, length):
        if level == "N":
            return shard.clone()
        out = torch.empty(length, dtype=shard.dtype)
        self._all_gather(_GROUP_OF[level], out, shard.contiguous())
        return out

    @torch.no_grad()
    def consolidated_state_dict(self):
        """The whole model's weights (from the fp32 masters) and the
        optimizer's state per parameter name, on every rank (a collective:
        every rank calls it). Keys of "model" are the wrapped module's."""
        names = {id(p): n for n, p in self.module.named_parameters()}
        model, state = {}, {}
        self._phase = "checkpoint"
        for unit in self.units:
            full = self._gather_level(self.levels[2], unit.master.detach(), unit.length)
            per_key = {}
            for key, value in self.optimizer.state.get(unit.master, {}).items():
                if _is_per_element(value, unit.master.numel()):
                    per_key[key] = self._gather_level(self.levels[2], value, unit.length)
                else:  # a scalar such as Adam's step count
                    per_key[key] = value.clone() if torch.is_tensor(value) else value
            off = 0
            for p, k in zip(unit.params, unit.numels):
                name = names[id(p)]
                model[name] = full[off:off + k].view(p.shape).to(p.dtype).clone()
                state[name] = {key: (v[off:off + k].view(p.shape).clone() if _is_per_element(v, unit.length)
                                     else v) for key, v in per_key.items()}
                off += k
        self._phase = "micro"
        for name, value in self.module.state_dict().items():
            if name not in model:  # buffers and frozen parameters (trainable ones may have no storage now)
                model[name] = value.clone()
        return {"model": model, "optimizer": {"state": state, "strategy": self.strategy}}

    @torch.no_grad()
    def load_consolidated_state_dict(self, sd):
        """Loads what consolidated_state_dict returned (from any strategy and
        any number of ranks): each rank takes its shards."""
        names = {id(p): n for n, p in self.module.named_parameters()}
        model, state = sd["model"], sd["optimizer"]["state"]
        for unit in self.units:
            flat = torch.zeros(unit.length, dtype=torch.float32)
            per_key = {}
            off = 0
            for p, k in zip(unit.params, unit.numels):
                name = names[id(p)]
                if name not in model:
                    raise KeyError(f"hoccl paro: the checkpoint has no weights for {name}")
                flat[off:off + k].copy_(model[name].reshape(-1))
                for key, v in state.get(name, {}).items():
                    if torch.is_tensor(v) and v.dim() > 0 and v.numel() == k:
                        per_key.setdefault(key, torch.zeros(unit.length, dtype=v.dtype))[off:off + k].copy_(
                            v.reshape(-1))
                    else:
                        per_key[key] = v
                off += k
            unit.master.copy_(flat[slice(*unit.os_range)])
            opt_state = {key: (v[slice(*unit.os_range)].clone() if _is_per_element(v, unit.length)
                               else (v.clone() if torch.is_tensor(v) else v)) for key, v in per_key.items()}
            if opt_state:
                self.optimizer.state[unit.master] = opt_state
            else:
                self.optimizer.state.pop(unit.master, None)
            if unit.p_shard is None:
                unit.full.copy_(flat.to(unit.dtype))
            else:
                unit.p_shard.copy_(flat[slice(*unit.p_range)].to(unit.dtype))
        buffers = {n: v for n, v in model.items() if n not in {names[id(p)] for u in self.units for p in u.params}}
        self.module.load_state_dict(buffers, strict=False)


def _find_advisor():
    """The hoccl-paro program: HOCCL_PARO, else on PATH, else beside this
    package (installed: <prefix>/bin; build tree: the build directory)."""
    import os
    import shutil
    explicit = os.environ.get("HOCCL_PARO")
    if explicit:
        return explicit
    found = shutil.which("hoccl-paro")
    if found:
        return found
    here = os.path.dirname(os.path.abspath(__file__))
    for rel in ("../../../../bin/hoccl-paro", "../../../../hoccl-paro"):
        path = os.path.normpath(os.path.join(here, rel))
        if os.access(path, os.X_OK):
            return path
    raise RuntimeError("hoccl paro: strategy='auto' needs the hoccl-paro program (installed with hoccl); "
                       "put it on PATH or name it in HOCCL_PARO")


def advise(params, accumulation_steps, dtype, units, groups, advisor_args=(), mem_gb=None):
    """hoccl-paro's advice for this model on these groups' shape: a dict with
    "recommended" and one entry per strategy (predicted communication per
    step, state bytes, fits). advisor_args: hoccl-sim's machine options
    (link rates, --tune-file, --leaves ...); HOCCL_TOPO_FILE and
    HOCCL_TUNE_FILE apply as for hoccl-sim. Every rank runs the same
    program on the same input, so every rank gets the same advice."""
    import json
    import subprocess
    names = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
    if dtype not in names:
        raise RuntimeError(f"hoccl paro: strategy='auto' costs bf16, fp16 or fp32 parameters, not {dtype}")
    cmd = [_find_advisor(), "--json", "--nodes", str(groups.nnodes), "--ranks-per-node", str(groups.nlocal),
           "--params", str(params), "--accum", str(accumulation_steps), "--dtype", names[dtype],
           "--units", str(units)] + [str(a) for a in advisor_args]
    if mem_gb:
        cmd += ["--mem-gb", str(mem_gb)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode not in (0, 3) or not run.stdout.strip():
        raise RuntimeError(f"hoccl paro: {' '.join(cmd)} failed ({run.returncode}): {run.stderr.strip()}")
    advice = json.loads(run.stdout)
    if not advice.get("recommended"):
        raise RuntimeError(f"hoccl paro: no strategy's training state fits in {mem_gb} GB per rank "
                           f"(hoccl-paro: {' '.join(cmd)})")
    return advice


def _is_per_element(value, numel):
    """Whether an optimizer state value holds one entry per element (a
    moment), not a scalar (a step count)."""
    return torch.is_tensor(value) and value.dim() == 1 and value.numel() == numel


def _for_tensors(value, fn):
    if torch.is_tensor(value):
        fn(value)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _for_tensors(v, fn)
    elif isinstance(value, dict):
        for v in value.values():
            _for_tensors(v, fn)
