"""What a warm-up plan compiles: every eager (op, dtype, shape) signature and every torch.compile graph shape
the trace compiled, with the host op's recorded inputs to call it again, and the bucket sizes the shape-churn
findings chose. Plain data (JSON-ready); `neuron_prof.warmup` writes and runs it.

Eager compiles come from the compile track (blocking: the op waited) and from the runtime's compile thread
(asynchronous, `NEURON_LAUNCH_BLOCKING=0`: the compile track holds only the waits it caused); each is followed
back along its flows to the host op that asked for it, whose "Input Dims", "Input type" and "Concrete Inputs"
say how to call it again.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from neuron_prof.analysis.compile.events import MODE_ARG, compiles, signature_text
from neuron_prof.analysis.compile.shapes import shapes_of
from neuron_prof.analysis.context import Context
from neuron_prof.model import Arg, Cat, Trace, TrackKind

_DIGEST = re.compile(r"_[0-9a-f]{8,}$")
"""The cache key's digest after the op name and overload ("aten::sum.dim_IntList_d998feefad395f58")."""
_INPUTS = "Input Dims"


def _overload(name: str, key: str) -> tuple[str, str]:
    """(op, overload) of an eager compile: the overload from the backend's cache key when it names one."""
    full = _DIGEST.sub("", key) if key.startswith(name) else name
    op, _, overload = full.partition(".")
    return op or name, overload


def _host_args(trace: Trace, ctx: Context, row: int) -> dict[str, Any]:
    """The args of the host op that asked for the compile at `row`: back along flows (a wait's stall <- the
    compile thread's work <- the host op), at most three steps."""
    fl = trace.flows
    for _ in range(3):
        src = np.flatnonzero(fl.dst == row)
        if not len(src):
            return {}
        row = int(fl.src[src[0]])
        a = ctx.slice_args(row)
        if _INPUTS in a:
            return a
    return {}


def _eager_rows(trace: Trace, ctx: Context) -> list[tuple[int, str, dict[str, Any], str, int]]:
    """(row, op name, compile args, call site, ns) of every cache-missing eager compile, blocking or not."""
    out = [(c.row, c.name, c.args, c.call_site, c.dur) for c in compiles(trace, ctx)
           if c.cache == "miss" and c.kind == "eager" and c.args.get(MODE_ARG) != "async"]
    sl = trace.slices
    for r in ctx.cat_rows(ctx.rows(TrackKind.OTHER), [Cat.COMPILE]).tolist():
        a = ctx.slice_args(int(r))
        if a.get(MODE_ARG) == "async" and a.get(Arg.COMPILE_KIND) == "eager" and a.get(Arg.CACHE, "miss") == "miss":
            out.append((int(r), trace.slice_name(int(r)), a, str(a.get(Arg.CALL_SITE) or ""), int(sl.dur_ns[r])))
    return sorted(out, key=lambda e: int(sl.ts_ns[e[0]]))


def warmup_entries(trace: Trace, ctx: Context | None = None) -> dict[str, Any]:
    """{"eager": [...], "graphs": [...], "buckets": [...]}: what to compile before training, first seen first.

    An eager entry: op, overload, the host op's "Input Dims", "Input type" and "Concrete Inputs" (what calls
    it again), its call site, how many times it compiled and its compile time. A graph entry: the frame, the
    graph's name, its input shapes when recorded, the sizes its churned dimension took (`sizes`), call site. A
    bucket entry: the churned dimension, the sizes it took and its buckets."""
    ctx = ctx or Context(trace)
    eager: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row, name, args, site, ns in _eager_rows(trace, ctx):
        a = _host_args(trace, ctx, row)
        dims, types, conc = a.get(_INPUTS), a.get("Input type"), a.get("Concrete Inputs")
        if not isinstance(dims, list) or not isinstance(types, list):
            continue  # no recorded inputs (record_shapes off): nothing to call it with
        op, overload = _overload(name, str(args.get(Arg.SIGNATURE) or ""))
        e = eager.setdefault((op, overload, repr(dims), repr(types), repr(conc)), {
            "op": op, "overload": overload, "dims": dims, "types": types,
            "concrete": conc if isinstance(conc, list) else [], "call_site": site, "count": 0, "compile_ns": 0})
        e["count"] += 1
        e["compile_ns"] += ns
    graphs: dict[tuple[str, str], dict[str, Any]] = {}
    for c in compiles(trace, ctx):
        if c.cache != "miss" or c.kind == "eager" or not c.frame:
            continue
        shapes = signature_text(c.signature)
        g = graphs.setdefault((c.frame, shapes), {
            "frame": c.frame, "graph": c.name, "kind": c.kind, "shapes": shapes,
            "input_shapes": [list(sh) for sh in shapes_of(c.signature)], "call_site": c.call_site,
            "count": 0, "compile_ns": 0})
        g["count"] += 1
        g["compile_ns"] += c.dur
    buckets = _buckets(trace, ctx)
    for g in graphs.values():  # the sizes a graph's churned dimension took: what to call its graph with
        g["sizes"] = sorted({int(v) for b in buckets if f"(frame {g['frame']})" in b["subject"] for v in b["values"]})
    return {"eager": list(eager.values()), "graphs": list(graphs.values()), "buckets": buckets}


def _buckets(trace: Trace, ctx: Context) -> list[dict[str, Any]]:
    """The bucket sizes each shape-churn finding chose (`churn.shape_churn`)."""
    from neuron_prof.analysis.compile.churn import shape_churn

    out = []
    for f in shape_churn(trace, ctx):
        plan = f.evidence.get("plan") or {}
        if plan.get("buckets"):
            out.append({"subject": f.evidence.get("subject", ""), "dimension": f.evidence.get("dimension", ""),
                        "values": f.evidence.get("values", []), "buckets": list(plan["buckets"]),
                        "call_site": f.call_site})
    return out
