"""What a warm-up plan compiles: every eager (op, dtype, shape) signature and every torch.compile graph shape
the trace compiled, with the host op's recorded inputs to call it again, and the bucket sizes the shape-churn
findings chose. Plain data (JSON-ready); `neuron_prof.warmup` writes and runs it.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from neuron_prof.analysis.compile.events import compiles, signature_text
from neuron_prof.analysis.compile.shapes import shapes_of
from neuron_prof.analysis.context import Context
from neuron_prof.model import Trace

_DIGEST = re.compile(r"_[0-9a-f]{8,}$")
"""The cache key's digest after the op name and overload ("aten::sum.dim_IntList_d998feefad395f58")."""


def _overload(c: Any) -> tuple[str, str]:
    """(op, overload) of an eager compile: the overload from the backend's cache key when it names one."""
    key = str(c.args.get("signature") or "")
    full = _DIGEST.sub("", key) if key.startswith(c.name) else c.name
    op, _, overload = full.partition(".")
    return op or c.name, overload


def warmup_entries(trace: Trace, ctx: Context | None = None) -> dict[str, Any]:
    """{"eager": [...], "graphs": [...], "buckets": [...]}: what to compile before training, first seen first.

    An eager entry: op, overload, the host op's "Input Dims", "Input type" and "Concrete Inputs" (what calls
    it again), its call site, how many times it compiled and its compile time. A graph entry: the frame, the
    graph's name, its input shapes when recorded, the sizes its churned dimension took (`sizes`), call site. A
    bucket entry: the churned dimension, the sizes it took and its buckets."""
    ctx = ctx or Context(trace)
    fl = trace.flows
    eager: dict[tuple[Any, ...], dict[str, Any]] = {}
    graphs: dict[tuple[str, str], dict[str, Any]] = {}
    for c in compiles(trace, ctx):
        if c.cache != "miss":
            continue
        if c.kind == "eager":
            src = np.flatnonzero(fl.dst == c.row)
            a = ctx.slice_args(int(fl.src[src[0]])) if len(src) else {}
            dims, types, conc = a.get("Input Dims"), a.get("Input type"), a.get("Concrete Inputs")
            if not isinstance(dims, list) or not isinstance(types, list):
                continue  # no recorded inputs (record_shapes off): nothing to call it with
            op, overload = _overload(c)
            key = (op, overload, repr(dims), repr(types), repr(conc))
            e = eager.setdefault(key, {"op": op, "overload": overload, "dims": dims, "types": types,
                                       "concrete": conc if isinstance(conc, list) else [],
                                       "call_site": c.call_site, "count": 0, "compile_ns": 0})
        elif c.frame:
            shapes = signature_text(c.signature)
            e = graphs.setdefault((c.frame, shapes), {
                "frame": c.frame, "graph": c.name, "kind": c.kind, "shapes": shapes,
                "input_shapes": [list(sh) for sh in shapes_of(c.signature)], "call_site": c.call_site,
                "count": 0, "compile_ns": 0})
        else:
            continue
        e["count"] += 1
        e["compile_ns"] += c.dur
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
