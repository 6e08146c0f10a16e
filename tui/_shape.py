"""View-specific shaping of a Trace into the columns the TUI tables show. Pure numpy, no Textual.

Everything here is a grouping of probe slices the way one view lays them out (compile stalls by
signature, fallbacks by call site, collectives by op and rank) or the columns of an analysis table (ops).
Diagnoses (findings, their cost ranking and advice) and op accounting come from `neuron_prof.analysis`.

A table is a plain ``dict[str, np.ndarray]`` of equal-length columns; string columns are object arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from neuron_prof.analysis import OpTable, sites_of
from neuron_prof.analysis._collectives import collective_rows, message_bytes, op_key
from neuron_prof.analysis._compile import compiles
from neuron_prof.analysis._context import Context
from neuron_prof.analysis._steps import find_steps
from neuron_prof.model import Arg, Trace, TrackKind

Table = dict[str, np.ndarray]


def step_times(trace: Trace) -> np.ndarray:
    """Duration of each training step in ns (steps as the analysis finds them), in time order."""
    _, start, end = find_steps(trace)
    dur: np.ndarray = (end - start).astype(np.int64)
    return dur


# ---- probe tables ----------------------------------------------------------------------------
def _obj(values: Sequence[Any]) -> np.ndarray:
    a = np.empty(len(values), dtype=object)
    a[:] = list(values)
    return a


def _text(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple)):
        return "\n".join(_text(x) for x in v)
    return str(v)


def _sorted(table: Table, key: str) -> Table:
    o = np.argsort(-table[key], kind="stable")
    return {k: v[o] for k, v in table.items()}


def compile_table(trace: Trace) -> Table:
    """Compiles grouped by (op or graph, signature), most total time first.

    Compiles come parsed by the analysis (signature and call site filled from the host op that paid for
    the compile), so rows agree with the compile findings. Columns: name, signature, kind, total_ns,
    count, max_ns, call_site, module, ts_ns (first), track, reasons (one line per distinct recompile
    reason), cache, rows (compile slice rows).
    """
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    s = trace.slices
    for c in compiles(trace, Context(trace)):
        key = (c.name, _signature(c.signature))
        g = groups.get(key)
        if g is None:
            g = groups[key] = {
                "total": 0,
                "count": 0,
                "max": 0,
                "ts": c.ts,
                "track": int(s.track[c.row]),
                "site": c.call_site,
                "module": c.module,
                "kind": c.kind,
                "reasons": {},
                "cache": {},
                "rows": [],
            }
        g["total"] += c.dur
        g["count"] += 1
        g["max"] = max(g["max"], c.dur)
        g["rows"].append(c.row)
        g["site"] = g["site"] or c.call_site
        if c.reason:
            g["reasons"][c.reason] = g["reasons"].get(c.reason, 0) + 1
        g["cache"][c.cache] = g["cache"].get(c.cache, 0) + 1
    vals = list(groups.values())
    t: Table = {
        "name": _obj([k[0] for k in groups]),
        "signature": _obj([k[1] for k in groups]),
        "kind": _obj([g["kind"] for g in vals]),
        "total_ns": np.array([g["total"] for g in vals], dtype=np.int64),
        "count": np.array([g["count"] for g in vals], dtype=np.int64),
        "max_ns": np.array([g["max"] for g in vals], dtype=np.int64),
        "call_site": _obj([g["site"] for g in vals]),
        "module": _obj([g["module"] for g in vals]),
        "ts_ns": np.array([g["ts"] for g in vals], dtype=np.int64),
        "track": np.array([g["track"] for g in vals], dtype=np.int64),
        "reasons": _obj(["\n".join(f"{n}x {r}" for r, n in g["reasons"].items()) for g in vals]),
        "cache": _obj([", ".join(f"{c} {n}" for c, n in g["cache"].items()) for g in vals]),
        "rows": _obj([g["rows"] for g in vals]),
    }
    return _sorted(t, "total_ns")


def _signature(v: Any) -> str:
    """A signature as one line: strings as they are, shape lists as compact JSON ("[[8,128],[128,128]]")."""
    if isinstance(v, str):
        return v
    try:
        return orjson.dumps(v).decode()
    except TypeError:
        return str(v)


def plan_text(plan: dict[str, Any]) -> str:
    """A bucket plan (BucketPlan.to_dict()) in one line: "37 compiles -> 4 buckets [...], +9% padded"."""
    k = int(plan.get("k", len(plan.get("buckets", []))))
    return (
        f"{plan.get('compiles_before', '?')} compiles -> {k} bucket{'s' if k != 1 else ''} "
        f"{list(plan.get('buckets', []))}, +{float(plan.get('waste_share', 0)):.0%} padded"
    )


def fallback_table(trace: Trace) -> Table:
    """CPU fallbacks grouped by (call site, op), most host time first.

    Columns: call_site, name, count, total_ns, share (of wall time), copy_bytes, module, stack, ts_ns, track.
    """
    rows = trace.slices_on(TrackKind.FALLBACK)
    s = trace.slices
    sites = sites_of(Context(trace))
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for r in rows[np.argsort(s.ts_ns[rows], kind="stable")]:
        a = trace.slice_args(int(r))
        # the analysis' call site keeps this table's rows matching the cpu_fallback findings
        site = sites.of_row(int(r))
        key = (site.call_site or site.function, trace.slice_name(int(r)))
        g = groups.get(key)
        if g is None:
            g = groups[key] = {
                "total": 0,
                "count": 0,
                "bytes": 0,
                "ts": int(s.ts_ns[r]),
                "track": int(s.track[r]),
                "module": _text(a.get(Arg.MODULE)),
                "stack": _text(a.get(Arg.STACK)),
            }
        g["total"] += int(s.dur_ns[r])
        g["count"] += 1
        cb = a.get(Arg.COPY_BYTES)
        g["bytes"] += int(cb) if isinstance(cb, (int, float)) else 0
    vals = list(groups.values())
    total = np.array([g["total"] for g in vals], dtype=np.int64)
    t: Table = {
        "call_site": _obj([k[0] for k in groups]),
        "name": _obj([k[1] for k in groups]),
        "count": np.array([g["count"] for g in vals], dtype=np.int64),
        "total_ns": total,
        "share": total / max(trace.wall_ns, 1),
        "copy_bytes": np.array([g["bytes"] for g in vals], dtype=np.int64),
        "module": _obj([g["module"] for g in vals]),
        "stack": _obj([g["stack"] for g in vals]),
        "ts_ns": np.array([g["ts"] for g in vals], dtype=np.int64),
        "track": np.array([g["track"] for g in vals], dtype=np.int64),
    }
    return _sorted(t, "total_ns")


def op_view(trace: Trace, ops: OpTable) -> Table:
    """The analysis' op table (`neuron_prof.analysis.op_table`) as the ops view's columns, most self time
    first: the calls, self and total time that `summary` and `diff` show.

    Columns: name (the op key: "ProfilerStep#*" for every step, overloads folded), where ("host" |
    "device"), self_ns, total_ns, count, avg_ns, op (index into `ops`, for calls_table), ts_ns and track
    (of the longest call).
    """
    s = trace.slices
    return {
        "name": ops.name,
        "where": ops.where,
        "self_ns": ops.self_ns,
        "total_ns": ops.total_ns,
        "count": ops.calls,
        "avg_ns": ops.total_ns // np.maximum(ops.calls, 1),
        "op": np.arange(len(ops), dtype=np.int64),
        "ts_ns": s.ts_ns[ops.longest],
        "track": s.track[ops.longest].astype(np.int64),
    }


def calls_table(trace: Trace, ops: OpTable, op: int) -> Table:
    """Every call of entry `op` of the op table, longest first: one row per call (a re-dispatched copy of
    the op inside it is not a call of its own); any number of rows (the virtual table pages them).

    Columns: row (the call's outer slice), ts_ns, dur_ns, self_ns, track.
    """
    rows, self_ns = ops.call_rows(op)
    s = trace.slices
    return {
        "row": rows,
        "ts_ns": s.ts_ns[rows],
        "dur_ns": s.dur_ns[rows],
        "self_ns": self_ns,
        "track": s.track[rows].astype(np.int64),
    }


def collective_table(traces: Sequence[Trace]) -> Table:
    """Collectives grouped by (rank, op): count, bytes, time, mean bandwidth; most time first.

    Rows, op names and byte counts are the analysis' own (probe track, else NCCL/RCCL kernels, else gloo).
    """
    groups: dict[tuple[int, str], dict[str, Any]] = {}
    for i, trace in enumerate(traces):
        rank = trace.rank if trace.rank is not None else i
        s = trace.slices
        rows = collective_rows(trace, Context(trace))
        for r in rows[np.argsort(s.ts_ns[rows], kind="stable")]:
            a = trace.slice_args(int(r))
            key = (rank, op_key(trace.slice_name(int(r)), a))
            g = groups.setdefault(
                key,
                {
                    "count": 0,
                    "bytes": 0,
                    "total": 0,
                    "ts": int(s.ts_ns[r]),
                    "track": int(s.track[r]),
                    "trace": i,
                    "dtype": _text(a.get(Arg.DTYPE, a.get("dtype"))),
                    "group": _text(a.get(Arg.GROUP, a.get("Process Group Name"))),
                },
            )
            g["count"] += 1
            g["bytes"] += message_bytes(a)
            g["total"] += int(s.dur_ns[r])
    vals = list(groups.values())
    total = np.array([g["total"] for g in vals], dtype=np.int64)
    nbytes = np.array([g["bytes"] for g in vals], dtype=np.int64)
    t: Table = {
        "rank": np.array([k[0] for k in groups], dtype=np.int64),
        "name": _obj([k[1] for k in groups]),
        "count": np.array([g["count"] for g in vals], dtype=np.int64),
        "bytes": nbytes,
        "total_ns": total,
        # bytes per ns is GB/s; no byte count (many Kineto traces) shows as no bandwidth
        "gbps": np.where((total > 0) & (nbytes > 0), nbytes / np.maximum(total, 1), np.nan),
        "dtype": _obj([g["dtype"] for g in vals]),
        "group": _obj([g["group"] for g in vals]),
        "ts_ns": np.array([g["ts"] for g in vals], dtype=np.int64),
        "track": np.array([g["track"] for g in vals], dtype=np.int64),
        "trace": np.array([g["trace"] for g in vals], dtype=np.int64),
    }
    return _sorted(t, "total_ns")


def memory_series(trace: Trace) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """(track, ts_ns, value) per memory counter track (bytes), in time order."""
    c = trace.counters
    out = []
    for t in trace.track_ids(TrackKind.MEMORY):
        rows = np.flatnonzero(c.track == t)
        if len(rows):
            rows = rows[np.argsort(c.ts_ns[rows], kind="stable")]
            out.append((int(t), c.ts_ns[rows], c.value[rows]))
    return out


def rank_table(ranks: Sequence[tuple[Trace, dict[str, Any]]]) -> Table:
    """One row per loaded trace (rank) from its analysis totals: wall, device busy, probe times, step."""

    def num(tot: dict[str, Any], key: str) -> float:
        v = tot.get(key)
        return float(v) if isinstance(v, (int, float)) else np.nan

    rows = []
    for i, (t, tot) in enumerate(ranks):
        st = step_times(t)
        rows.append(
            (
                t.rank if t.rank is not None else i,
                tot,
                float(np.median(st)) if len(st) else np.nan,
                str(t.metadata.get("source", "")),
            )
        )
    return {
        "rank": np.array([r[0] for r in rows], dtype=np.int64),
        **{
            k: np.array([num(r[1], k) for r in rows], dtype=np.float64)
            for k in ("wall_ns", "device_busy_share", "compile_ns", "fallback_ns", "sync_ns", "collective_ns")
        },
        "step_ns": np.array([r[2] for r in rows], dtype=np.float64),
        "source": _obj([r[3] for r in rows]),
        "trace": np.arange(len(rows), dtype=np.int64),
    }
