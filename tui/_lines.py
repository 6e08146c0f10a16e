"""The lines view's tables (no Textual): the analysis' `LineTable` as view columns, a line's ops, an op's
calls."""

from __future__ import annotations

import numpy as np

from neuron_prof.analysis import LineTable, Sites
from neuron_prof.model import Trace

NO_LINE = "(no user line)"


def _obj(vals: list[object]) -> np.ndarray:
    a = np.empty(len(vals), dtype=object)
    a[:] = vals
    return a


def lines_view(t: LineTable) -> dict[str, np.ndarray]:
    """The lines view's columns, most costly line first (the analysis' order)."""
    c = t.cols
    return {
        "call_site": _obj([t.label(i) if (t.call_site[i] or t.function[i]) else NO_LINE
                           for i in range(len(t))]),
        "cost_ns": t.cost_ns,
        "host_ns": c["host_ns"],
        "host_backward_ns": c["host_backward_ns"],
        "device_ns": c["device_ns"],
        "compile_ns": c["compile_ns"],
        "compiles": c["compiles"],
        "fallback_ns": c["fallback_ns"],
        "sync_ns": c["sync_ns"],
        "collective_ns": c["collective_ns"],
        "alloc_bytes": c["alloc_bytes"],
        "backward": _obj([", ".join(b) for b in t.backward_of]),
        "index": np.arange(len(t), dtype=np.int64),
    }


def line_ops(trace: Trace, t: LineTable, i: int, sites: Sites) -> dict[str, np.ndarray]:
    """Line `i`'s host slices grouped by (op, forward or the backward of which autograd node): calls and self
    time as the line counts them, and the slice rows; most self time first."""
    rows, self_ns = t.rows_of(i), t.self_of(i)
    groups: dict[tuple[str, str], list[int]] = {}
    for k, r in enumerate(rows.tolist()):
        groups.setdefault((trace.slice_name(r), sites.of_row(r).backward), []).append(k)
    keys = list(groups)
    total = np.asarray([int(self_ns[groups[k]].sum()) for k in keys], dtype=np.int64)
    o = np.argsort(-total, kind="stable")
    return {
        "name": _obj([keys[j][0] for j in o]),
        "where": _obj([f"backward ({keys[j][1]})" if keys[j][1] else "forward" for j in o]),
        "count": np.asarray([len(groups[keys[j]]) for j in o], dtype=np.int64),
        "self_ns": total[o],
        "members": _obj([np.asarray(groups[keys[j]], dtype=np.int64) for j in o]),
    }


def calls_of(trace: Trace, t: LineTable, i: int, members: np.ndarray) -> dict[str, np.ndarray]:
    """The calls (`CallsScreen` columns) of one op of line `i`: its slices, longest first."""
    rows, self_ns = t.rows_of(i)[members], t.self_of(i)[members]
    s = trace.slices
    o = np.argsort(-s.dur_ns[rows], kind="stable")
    rows = rows[o]
    return {"row": rows, "ts_ns": s.ts_ns[rows], "dur_ns": s.dur_ns[rows], "self_ns": self_ns[o],
            "track": s.track[rows].astype(np.int64)}


