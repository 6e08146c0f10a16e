"""The compile stalls view's table (no Textual): compiles by op or torch.compile graph, each expanding to
its signatures and call sites; and the view's empty state and bucket plans in words."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np

from neuron_prof.analysis import (
    CompileGroup,
    Context,
    GraphCompiles,
    Site,
    compile_groups,
    compiles,
    fmt_ns,
    graph_compiles,
    signature_text,
    sites_of,
)
from neuron_prof.model import Trace
from neuron_prof.tui._shape import Table, objects


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
    return {k: np.array(v, dtype=np.int64) if k in ints else objects(v) for k, v in cols.items()}


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
