"""Diff of two traces: step time, totals, per-op calls and self time (host and device apart, as
`_ops.op_table` counts them), per finding kind, and the fallbacks and compiles that appeared or disappeared.

    d = diff(load("base.json"), load("new.json"))
    d["step"]["delta_ns"], d["ops"][0], d["fallbacks"]["appeared"]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.analysis.compile.events import compiles
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.ops import op_table
from neuron_prof.analysis.pipeline import Report, report
from neuron_prof.model import Trace

_TOTAL_KEYS = (
    "wall_ns",
    "host_busy_ns",
    "device_busy_ns",
    "compile_ns",
    "compile_miss_count",
    "fallback_ns",
    "fallback_count",
    "sync_ns",
    "sync_count",
    "collective_ns",
    "collective_count",
)


def op_self_times(trace: Trace, ctx: Context | None = None) -> dict[tuple[str, str], tuple[int, int]]:
    """(where, op) -> (calls, self ns) of every op (`_ops.op_table`: the numbers summary and the TUI show)."""
    t = op_table(trace, ctx)
    return {
        (str(t.where[i]), str(t.name[i])): (int(t.calls[i]), int(t.self_ns[i]))
        for i in np.flatnonzero(t.is_op).tolist()
    }


def _change(a: float | None, b: float | None) -> dict[str, Any]:
    d: dict[str, Any] = {"base": a, "new": b}
    if a is not None and b is not None:
        d["delta"] = b - a
        d["ratio"] = (b / a) if a else None
    return d


def _finding_keys(rep: Report, kind: Kind, what: str) -> dict[str, dict[str, Any]]:
    """Each finding of `kind` by "<evidence[what]> @ call site" (what `diff` and `check --baseline` match on)."""
    return {
        f"{f.evidence.get(what, '')} @ {f.call_site or '?'}": {
            "op": f.evidence.get(what, ""),
            "call_site": f.call_site,
            "count": f.count,
            "cost_ns": f.cost_ns,
        }
        for f in rep.findings
        if f.kind == kind
    }


def fallback_keys(rep: Report) -> dict[str, dict[str, Any]]:
    """Each CPU fallback finding by "op @ call site"."""
    return _finding_keys(rep, Kind.CPU_FALLBACK, "op")


def compile_keys(trace: Trace, ctx: Context) -> dict[str, dict[str, Any]]:
    """Each cache-missing compile by "op signature" (eager) or "graph (frame F)" (torch.compile)."""
    out: dict[str, dict[str, Any]] = {}
    for c in compiles(trace, ctx):
        if c.cache != "miss":
            continue
        key = f"{c.name} {c.signature}" if c.kind == "eager" or not c.frame else f"{c.name} (frame {c.frame})"
        d = out.setdefault(
            key, {"name": c.name, "kind": c.kind, "count": 0, "ns": 0, "call_site": c.call_site}
        )
        d["count"] += 1
        d["ns"] += c.dur
    return out


def compiles_after_first_step(trace: Trace, ctx: Context) -> int | None:
    """Cache-missing compiles that start after the first step ended: what a training step paid for, beyond
    the first (None without steps). A warm-up plan run before the first step makes it 0."""
    st = ctx.steps
    if not len(st):
        return None
    end = int(st.end_ns[0])
    return sum(1 for c in compiles(trace, ctx) if c.cache == "miss" and c.ts >= end)


def sync_keys(rep: Report) -> dict[str, dict[str, Any]]:
    """Each sync point finding by "what @ call site"."""
    return _finding_keys(rep, Kind.SYNC_POINT, "what")


def appeared(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """The keys of `b` not in `a` ("appeared") and of `a` not in `b` ("disappeared")."""
    return {
        "appeared": [{"key": k, **b[k]} for k in b if k not in a],
        "disappeared": [{"key": k, **a[k]} for k in a if k not in b],
    }


_HEADLINE = (
    ("compile_ns", "compile time"),
    ("fallback_ns", "CPU fallback time"),
    ("sync_ns", "sync wait"),
    ("collective_ns", "collective time"),
    ("device_busy_ns", "device busy time"),
)


def headline(rb: Report, rn: Report) -> dict[str, Any] | None:
    """The largest change of the diff, in time over the profile: compile, fallback, sync, collective or device
    time, or the steady steps' time (median step change x steady steps). None when nothing changed."""
    cands: list[dict[str, Any]] = []
    for key, what in _HEADLINE:
        a, b = rb.totals.get(key), rn.totals.get(key)
        if isinstance(a, int) and isinstance(b, int) and a != b:
            cands.append({"key": key, "what": what, "base": a, "new": b, "delta": b - a})
    sb, sn = rb.totals["steps"], rn.totals["steps"]
    a, b = sb.get("steady_step_ns"), sn.get("steady_step_ns")
    n = min(_steady_count(sb), _steady_count(sn))
    if a is not None and b is not None and n > 0 and a != b:
        cands.append({"key": "steady_step_ns", "what": f"steady steps ({n} x the median step)", "base": a * n,
                      "new": b * n, "delta": (b - a) * n})
    return max(cands, key=lambda c: (abs(c["delta"]), c["key"])) if cands else None


def _steady_count(st: dict[str, Any]) -> int:
    """Steady steps of a totals' steps (`steps.phases`); older summaries: the steps after warm-up."""
    if st.get("steady_count") is not None:
        return int(st["steady_count"])
    return int(st.get("count") or 0) - int(st.get("warmup") or 0)


def diff(base: Trace, new: Trace, *, warmup_steps: int | None = None, top: int = 20) -> dict[str, Any]:
    """What got faster or slower from `base` to `new` (JSON-ready; renderers in exporters.summary)."""
    cb, cn = Context(base, warmup_steps), Context(new, warmup_steps)
    return diff_reports(base, new, cb, cn, report(base, context=cb), report(new, context=cn), top=top)


def diff_reports(base: Trace, new: Trace, cb: Context, cn: Context, rb: Report, rn: Report, *,
                 top: int = 20) -> dict[str, Any]:
    """`diff` over contexts and reports already computed (`check --baseline` shares them)."""
    sb, sn = rb.totals["steps"], rn.totals["steps"]
    step = _change(sb.get("steady_step_ns"), sn.get("steady_step_ns"))
    totals = {k: _change(rb.totals.get(k), rn.totals.get(k)) for k in _TOTAL_KEYS}
    totals["device_busy_share"] = _change(
        rb.totals.get("device_busy_share"), rn.totals.get("device_busy_share")
    )
    # per op: self time per step when both have steps (runs of different lengths compare), else per profile
    nb, nn = max(sb.get("count") or 0, 0), max(sn.get("count") or 0, 0)
    per_step = nb > 0 and nn > 0
    ob, on = op_self_times(base, cb), op_self_times(new, cn)
    ops: list[dict[str, Any]] = []
    for where, name in set(ob) | set(on):
        (c0, t0), (c1, t1) = ob.get((where, name), (0, 0)), on.get((where, name), (0, 0))
        s0, s1 = (t0 / nb, t1 / nn) if per_step else (float(t0), float(t1))
        ops.append(
            {
                "name": name,
                "where": where,
                "base_ns": int(s0),
                "new_ns": int(s1),
                "delta_ns": int(s1) - int(s0),
                "base_count": c0,
                "new_count": c1,
            }
        )
    ops.sort(key=lambda o: (-abs(o["delta_ns"]), o["name"], o["where"]))
    kinds = {}
    for k in sorted({str(f.kind) for f in rb.findings} | {str(f.kind) for f in rn.findings}):
        fb = [f for f in rb.findings if f.kind == k]
        fn = [f for f in rn.findings if f.kind == k]
        kinds[k] = {
            "base_cost_ns": sum(f.cost_ns for f in fb),
            "new_cost_ns": sum(f.cost_ns for f in fn),
            "base_count": sum(f.count for f in fb),
            "new_count": sum(f.count for f in fn),
            "base_findings": len(fb),
            "new_findings": len(fn),
        }
        kinds[k]["delta_cost_ns"] = kinds[k]["new_cost_ns"] - kinds[k]["base_cost_ns"]
    return {
        "schema": "neuron-prof.diff",
        "version": 1,
        "headline": headline(rb, rn),
        "step": step,
        "totals": totals,
        "ops_unit": "ns per step" if per_step else "ns per profile",
        "ops": ops[:top],
        "finding_kinds": kinds,
        "fallbacks": appeared(fallback_keys(rb), fallback_keys(rn)),
        "compiles": appeared(compile_keys(base, cb), compile_keys(new, cn)),
        "syncs": appeared(sync_keys(rb), sync_keys(rn)),
        "compiles_after_first_step": _change(compiles_after_first_step(base, cb), compiles_after_first_step(new, cn)),
    }
