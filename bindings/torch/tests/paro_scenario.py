"""The "paro" scenario of worker.py: every PaRO strategy trains the test model
on this rank's batches and writes what the test compares.

Environment: PARO_STRATEGIES (comma-separated; default all), PARO_ACCUM
(micro-steps per step, default 2), PARO_RESUME ("FROM,TO": train with FROM,
reload its consolidated checkpoint into TO and train one more step).
Nodes are hoccl's: the test sets HOCCL_HOSTID per rank.
"""
import os

import torch
import torch.nn as nn

import model_common
from hoccl_torch import paro

LR = 0.01


def adam(params):
    return torch.optim.Adam(params, lr=LR)


def train(model, steps, accum, rank, first_step=0):
    traces = []
    for step in range(first_step, first_step + steps):
        model.trace.clear()
        for a in range(accum):
            x, y = model_common.batch(step * accum + a, rank)
            nn.functional.mse_loss(model(x), y).backward()
        model.step()
        traces.append([list(t) for t in model.trace])
    return traces


def run(out, outdir, rank):
    accum = int(os.environ.get("PARO_ACCUM", "2"))
    names = os.environ.get("PARO_STRATEGIES") or ",".join(paro.STRATEGIES)
    groups = paro.ParoGroups(None)
    out["shape"] = {"nodes": groups.nnodes, "per_node": groups.nlocal, "node": groups.node, "local": groups.local}
    results = {}
    for name in names.split(","):
        model = paro.ParoDataParallel(model_common.make_model(), adam, strategy=name, accumulation_steps=accum,
                                      group=groups, trace=True)
        traces = train(model, model_common.STEPS, accum, rank)
        sd = model.consolidated_state_dict()
        results[name] = {"traces": traces, "bytes": model.state_bytes(),
                         "padded": sum(u.length for u in model.units), "units": len(model.units)}
        if rank == 0:
            torch.save(sd, os.path.join(outdir, f"paro_{name}.pt"))
    out["strategies"] = results
    resume = os.environ.get("PARO_RESUME")
    if resume:
        first, then = resume.split(",")
        a = paro.ParoDataParallel(model_common.make_model(), adam, strategy=first, accumulation_steps=accum,
                                  group=groups, trace=True)
        train(a, model_common.STEPS - 1, accum, rank)
        sd = a.consolidated_state_dict()
        b = paro.ParoDataParallel(model_common.make_model(), adam, strategy=then, accumulation_steps=accum,
                                  group=groups, trace=True)
        b.load_consolidated_state_dict(sd)
        train(b, 1, accum, rank, first_step=model_common.STEPS - 1)
        sd = b.consolidated_state_dict()  # a collective: every rank calls it
        if rank == 0:
            torch.save(sd, os.path.join(outdir, "paro_resumed.pt"))
    # Wrong use gets a clear error.
    errors = {}
    for what, fn in {
        "strategy": lambda: paro.ParoDataParallel(model_common.make_model(), adam, strategy="XYZ", group=groups),
        "accum": lambda: paro.ParoDataParallel(model_common.make_model(), adam, accumulation_steps=0, group=groups),
    }.items():
        try:
            fn()
            errors[what] = None
        except (ValueError, RuntimeError) as e:
            errors[what] = str(e)
    m = paro.ParoDataParallel(model_common.make_model(), adam, strategy="NIG", accumulation_steps=2, group=groups)
    x, y = model_common.batch(0, rank)
    nn.functional.mse_loss(m(x), y).backward()
    try:
        m.step()
        errors["early_step"] = None
    except RuntimeError as e:
        errors["early_step"] = str(e)
    out["errors"] = errors
    # strategy="auto" asks hoccl-paro (HOCCL_PARO, set by the test) on every rank.
    auto = paro.ParoDataParallel(model_common.make_model(), adam, strategy="auto", accumulation_steps=accum,
                                 group=groups, advisor_args=["--node-gbit", "1"])
    out["auto"] = {"strategy": auto.strategy, "advice": auto.advice}
