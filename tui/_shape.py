"""View-specific shaping of a Trace into the columns the TUI tables show. Pure numpy, no Textual.

Everything here is a grouping of probe slices the way one view lays them out (compile stalls by
signature, fallbacks by call site, collectives by op and rank) or the columns of an analysis table (ops).
Diagnoses (findings, their cost ranking and advice) and op accounting come from `neuron_prof.analysis`.

A table is a plain ``dict[str, np.ndarray]`` of equal-length columns; string columns are object arrays.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from neuron_prof.analysis import (
    CompileGroup,
    Context,
    Finding,
    GraphCompiles,
    Kind,
    OpTable,
    Site,
    collective_key,
    collective_rows,
    compile_groups,
    compiles,
    fallback_names,
    find_steps,
    fmt_ns,
    graph_compiles,
    message_bytes,
    norm_op,
    signature_text,
    sites_of,
)
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


def compile_table(trace: Trace, ctx: Context | None = None) -> Table:
    """Compiles by op (or torch.compile graph), each expanding to its children: two levels in one table, ops
    and graphs by total compile time, each one's children (rows with ``parent`` = its row) by total.

    An eager op's children are its (signature, call site) groups (`neuron_prof.analysis.compile_groups`, the
    findings' evidence). A torch.compile frame's children are its graphs, one per compile id ("0/0" and its
    recompiles "0/1"...), each holding every compile of that graph (Dynamo's, the backend's NEFFs of its
    forward and backward, the lazy backward: `neuron_prof.analysis.graph_compiles`), labelled with its compile
    id, the input shapes that differ between the frame's graphs and the guard that failed.
    Columns: parent (-1: an op or frame), name (op or frame), label (op: its name; child: the signature), search
    (what `/` matches), signature (a child's input shapes), call_site ("" when the line is not known),
    where (the call site as shown), function and site_reason (when the line is not known), module, stack
    (the user's frames, outermost first, one per line), kind, count, total_ns, max_ns, n_sigs and n_sites
    (ops), reasons (one line per distinct recompile reason), parts (a graph's compiles, one per line),
    cache, rows (compile slice rows), ts_ns (first compile), track.
    """
    ctx = ctx or Context(trace)
    sites = sites_of(ctx)
    by_row = {c.row: c for c in compiles(trace, ctx)}
    s = trace.slices
    graphs = graph_compiles(trace, ctx)
    in_graph = {r for g in graphs for r in g.rows}
    eager = [c for c in by_row.values() if c.row not in in_graph]
    # top rows by label: an op's name, or a frame's "forward (frame 0)" (two frames may share a function name)
    tops: dict[str, list[tuple[str, CompileGroup]]] = {}
    for g in compile_groups(trace, ctx, sorted(eager, key=lambda c: c.ts)):
        tops.setdefault(g.name, []).append((g.signature, g))
    for label, top, cg in _graph_children(graphs):
        tops.setdefault(top, []).append((label, cg))
    # ops by total, then name (stable); each op's groups come from compile_groups most total first
    order = sorted(tops.items(), key=lambda kv: (-sum(g.total_ns for _, g in kv[1]), kv[0]))
    cols: dict[str, list[Any]] = {k: [] for k in _COMPILE_COLUMNS}

    def add(parent: int, label: str, groups: list[CompileGroup]) -> None:
        rows = sorted((r for g in groups for r in g.rows), key=lambda r: by_row[r].ts)
        recs = [by_row[r] for r in rows]
        # a group's compiles share one call site (or, with no line, one function): its first row with a line
        group_sites = [sites.of_row(next((r for r in g.rows if by_row[r].call_site), g.rows[0])) for g in groups]
        keys = {x.call_site or x.function for x in group_sites}
        site = group_sites[0] if len(keys) == 1 else None
        member = parent >= 0
        stacks = dict.fromkeys("\n".join(sites.of_row(r).stack) for r in rows) if member else {}
        modules = {g.module for g in groups}
        module = next(iter(modules)) if len(modules) == 1 else ""
        graph = len({by_row[r].name for r in rows}) > 1
        vals = {
            "parent": parent,
            "name": groups[0].name,
            "label": label,
            # what `/` matches: an op row its name, a signature row its signature, call site and module
            "search": f"{label} {_where(site) if site else ''} {module}" if member else label,
            "signature": groups[0].signature if len({g.signature for g in groups}) == 1 else "",
            "call_site": site.call_site if site is not None else "",
            "where": _where(site) if site is not None else f"{len(keys)} call sites",
            "function": site.function if site is not None and not site.call_site else "",
            "site_reason": site.reason if site is not None and not site.call_site else "",
            "module": module,
            "stack": "\n\n".join(x for x in list(stacks)[:3] if x),
            "kind": ", ".join(dict.fromkeys(c.kind for c in recs)),
            "count": len(rows),
            "total_ns": sum(g.total_ns for g in groups),
            "max_ns": max(g.max_ns for g in groups),
            "n_sigs": 0 if member else len(groups),
            "n_sites": 0 if member else len(keys),
            "reasons": "\n".join(f"{n}x {r}" for r, n in Counter(c.reason for c in recs if c.reason).items()),
            "parts": "\n".join(_part(c) for c in recs) if member and graph else "",
            "cache": ", ".join(f"{c} {n}" for c, n in Counter(c.cache for c in recs).items()),
            "rows": rows,
            "ts_ns": recs[0].ts,
            "track": int(s.track[recs[0].row]),
        }
        for k, v in vals.items():
            cols[k].append(v)

    for name, children in order:
        op_row = len(cols["parent"])
        add(-1, name, [g for _, g in children])
        cols["n_sigs"][op_row] = len({label for label, _ in children})
        for label, g in children:
            add(op_row, label, [g])
    ints = {"parent", "count", "total_ns", "max_ns", "n_sigs", "n_sites", "ts_ns", "track"}
    return {k: np.array(v, dtype=np.int64) if k in ints else _obj(v) for k, v in cols.items()}


def _part(c: Any) -> str:
    """One compile of a graph in the detail pane: "model_0_forward_0 159.2 ms (torch.compile)"."""
    where = f", in the backward: {c.backward}" if c.backward else ""
    return f"{c.name} {fmt_ns(c.dur)} ({c.kind}{where})"


_SIZE_GUARD = re.compile(r"tensor '(?:L\['(\w+)'\]|([^']+))' size mismatch at index (\d+)\. expected (\S+), actual (\S+)")


def _short_guard(reason: str) -> str:
    """Dynamo's size guard in a few words: "tensor 'L['x']' size mismatch at index 0. expected 8, actual 16"
    -> "x dim 0: 8 → 16" (the whole reason is in the detail pane)."""
    m = _SIZE_GUARD.search(reason)
    if not m:
        return reason
    name = m.group(1) or m.group(2)
    return f"{name} dim {m.group(3)}: {m.group(4)} → {m.group(5)}"


def _graph_children(graphs: list[GraphCompiles]) -> list[tuple[str, str, CompileGroup]]:
    """(label, its frame's row label, group) per torch.compile graph. The label: its compile id, the input shapes
    that differ between its frame's graphs (all of them when none differ), and the guard that failed
    ("0/1 [12, 16]: x dim 0: 8 → 12"; "0/0 [8, 16] (first compile)")."""
    frames: dict[str, list[GraphCompiles]] = {}
    for g in graphs:
        frames.setdefault(g.frame, []).append(g)
    out = []
    for gs in frames.values():
        shapes = [g.shapes for g in gs if g.shapes]
        vary = [i for i in range(min(map(len, shapes), default=0)) if len({str(sh[i]) for sh in shapes}) > 1]
        for g in sorted(gs, key=lambda g: g.attempt):
            sig = signature_text([g.shapes[i] for i in vary]) if vary and len(g.shapes) > max(vary) else g.signature
            # Dynamo's reason names the attempt it failed against first ("0/0: tensor ..."): keep the guard
            reason = _short_guard(re.sub(r"^\d+/\d+: ", "", g.reason))
            label = g.compile_id + (f" {sig}" if sig else "") + (f": {reason}" if reason else " (first compile)")
            cg = CompileGroup(g.name, g.signature, g.call_site, g.module, "torch.compile", rows=list(g.rows),
                              total_ns=g.total_ns, max_ns=g.max_ns, first_ts=g.first_ts)
            out.append((label, g.frame_label, cg))
    return out


_COMPILE_COLUMNS = (
    "parent", "name", "label", "search", "signature", "call_site", "where", "function", "site_reason",
    "module", "stack", "kind", "count", "total_ns", "max_ns", "n_sigs", "n_sites", "reasons", "parts", "cache", "rows",
    "ts_ns", "track",
)


def _where(site: Site) -> str:
    """A call site as a table shows it: "path:LINE", else the function with "(line unknown)"."""
    if site.call_site:
        return site.call_site
    if site.function:
        return f"{site.function} (line unknown)"
    return "(line unknown)"


def no_compile_reason(trace: Trace) -> str:
    """Why a trace has no compile to show (the compile view's empty state)."""
    md = trace.metadata
    backend = str(md.get("backend") or "")
    if not backend:
        return ("this trace was not captured by neuron-prof: torch.profiler records no compiles (capture "
                "with `neuron-prof run` or neuron_prof.profile() to see them)")
    if backend in ("cpu", "cuda"):
        return (f"the {backend} backend has no compile step: its ops run eagerly; torch.compile graphs would "
                "show here, and none were compiled while profiling")
    cache = md.get("compile_cache")
    hits = cache.get("hits_on_old_entries") if isinstance(cache, dict) else None
    if isinstance(hits, int) and hits:
        return f"none while profiling: every signature came from the compile cache ({hits} cache hits)"
    return f"none while profiling: the {backend} backend compiled nothing in the profiled region"


def plan_text(plan: dict[str, Any]) -> str:
    """A bucket plan (BucketPlan.to_dict()) in one line: "37 compiles -> 4 buckets [...], +9% padded"."""
    k = int(plan.get("k", len(plan.get("buckets", []))))
    return (
        f"{plan.get('compiles_before', '?')} compiles -> {k} bucket{'s' if k != 1 else ''} "
        f"{list(plan.get('buckets', []))}, +{float(plan.get('waste_share', 0)):.0%} padded"
    )


def fallback_table(trace: Trace, findings: Sequence[Finding] = (), ctx: Context | None = None) -> Table:
    """CPU fallbacks grouped by (call site, op), most host time first; the cpu_fallback finding of each
    group (same call site and op) gives the ops the user's call went through.

    Columns: call_site, name (the op that fell back), called_as (the outermost op the user's call went
    through, else the op), chain ("called_as → ... → name"), names (what `/` matches: the call site and
    every name the finding answers to, `neuron_prof.analysis.fallback_names`), count, total_ns, share (of
    wall time), copy_bytes, module, stack, rows (the fallbacks' slice rows), ts_ns, track.
    """
    rows = trace.slices_on(TrackKind.FALLBACK)
    s = trace.slices
    sites = sites_of(ctx or Context(trace))
    found = {
        (f.call_site or str(f.evidence.get("function", "")), str(f.evidence.get("op", ""))): f
        for f in findings
        if f.kind == Kind.CPU_FALLBACK
    }
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
                "rows": [],
            }
        g["rows"].append(int(r))
        g["total"] += int(s.dur_ns[r])
        g["count"] += 1
        cb = a.get(Arg.COPY_BYTES)
        g["bytes"] += int(cb) if isinstance(cb, (int, float)) else 0
    vals = list(groups.values())
    total = np.array([g["total"] for g in vals], dtype=np.int64)
    chains, names = [], []
    for site, op in groups:
        f = found.get((site, op))
        via = [str(x) for x in f.evidence.get("called_as") or ()] if f is not None else []
        chains.append([*via, op])
        names.append(" ".join([site, op, *via, *sorted(fallback_names(f) if f else {norm_op(op)})]))
    t: Table = {
        "call_site": _obj([k[0] for k in groups]),
        "name": _obj([k[1] for k in groups]),
        "called_as": _obj([c[0] for c in chains]),
        "chain": _obj([" → ".join(c) for c in chains]),
        "names": _obj(names),
        "count": np.array([g["count"] for g in vals], dtype=np.int64),
        "total_ns": total,
        "share": total / max(trace.wall_ns, 1),
        "copy_bytes": np.array([g["bytes"] for g in vals], dtype=np.int64),
        "module": _obj([g["module"] for g in vals]),
        "stack": _obj([g["stack"] for g in vals]),
        "rows": _obj([g["rows"] for g in vals]),
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
        "row": np.asarray(ops.longest, dtype=np.int64),
        "ts_ns": s.ts_ns[ops.longest],
        "track": s.track[ops.longest].astype(np.int64),
    }


def slices_table(trace: Trace, rows: Sequence[int] | np.ndarray) -> Table:
    """Slices `rows` (the compiles of one signature, the fallbacks at one call site), longest first, with
    the columns of `calls_table` (self time: the whole duration, these are probe spans)."""
    r = np.asarray(rows, dtype=np.int64)
    s = trace.slices
    r = r[np.argsort(-s.dur_ns[r], kind="stable")]
    return {"row": r, "ts_ns": s.ts_ns[r], "dur_ns": s.dur_ns[r], "self_ns": s.dur_ns[r],
            "track": s.track[r].astype(np.int64)}


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
            key = (rank, collective_key(trace.slice_name(int(r)), a))
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
