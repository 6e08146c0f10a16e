"""Fallback hot spots: CPU fallbacks grouped by call site and op, by host time, with module and stack.

Each row names the op the user's code called and the op that fell back ("aten::linalg_svdvals →
aten::_linalg_svd"); `/` matches either, as users write them too ("torch.linalg.svdvals", "Tensor.sort"):
the rule of `neuron-prof check --forbid-fallback` (`neuron_prof.analysis.norm_op`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from textual.widget import Widget

from neuron_prof.analysis import Context, Finding, Kind, fallback_names, norm_op, sites_of
from neuron_prof.analysis.fmt import fmt_bytes, fmt_count, fmt_ns, fmt_share
from neuron_prof.model import Arg, Trace, TrackKind
from neuron_prof.tui._absent import no_fallback_reason
from neuron_prof.tui._data import RankTable
from neuron_prof.tui._shape import Table, arg_text, most_first, objects
from neuron_prof.tui.screens.base import Detail, ViewScreen, detail
from neuron_prof.tui.screens.ops import CallsScreen, slices_table
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable


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
                "module": arg_text(a.get(Arg.MODULE)),
                "stack": arg_text(a.get(Arg.STACK)),
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
    for at, op in groups:
        f = found.get((at, op))
        via = [str(x) for x in f.evidence.get("called_as") or ()] if f is not None else []
        chains.append([*via, op])
        names.append(" ".join([at, op, *via, *sorted(fallback_names(f) if f else {norm_op(op)})]))
    t: Table = {
        "call_site": objects([k[0] for k in groups]),
        "name": objects([k[1] for k in groups]),
        "called_as": objects([c[0] for c in chains]),
        "chain": objects([" → ".join(c) for c in chains]),
        "names": objects(names),
        "count": np.array([g["count"] for g in vals], dtype=np.int64),
        "total_ns": total,
        "share": total / max(trace.wall_ns, 1),
        "copy_bytes": np.array([g["bytes"] for g in vals], dtype=np.int64),
        "module": objects([g["module"] for g in vals]),
        "stack": objects([g["stack"] for g in vals]),
        "rows": objects([g["rows"] for g in vals]),
        "ts_ns": np.array([g["ts"] for g in vals], dtype=np.int64),
        "track": np.array([g["track"] for g in vals], dtype=np.int64),
    }
    return most_first(t, "total_ns")


FALLBACKS = RankTable("fallbacks", lambda rank: fallback_table(rank.trace, rank.findings, rank.context))


class FallbackScreen(ViewScreen):
    """CPU-fallback hot spots: the call sites whose fallbacks cost the most host time."""

    VIEW = "fallback"
    TITLE = "Fallback hot spots"
    HELP = "fallback hot spots"
    TABLES = (FALLBACKS,)
    LOADING = "the fallback hot spots"

    def compose_body(self) -> Iterable[Widget]:
        cols = [
            Column("call_site", "call site", 20, lambda v: v or "(line unknown)", clip_left=True, grow=24),
            Column("chain", "called as → op that fell back", 0, min_width=40),
            Column("count", "count", 6, fmt_count, right=True),
            Column("total_ns", "host time", 9, fmt_ns, right=True),
            Column("share", "share", 7, fmt_share, right=True, drop=2),
            Column("copy_bytes", "copies", 10, fmt_bytes, right=True, drop=3),
            Column("module", "module", 22, clip_left=True, drop=4),
        ]
        self.table = VirtualTable(
            cols, FALLBACKS.of(self.data), filter_key="names", queries=lambda q: (q, norm_op(q)), id="fallbacks"
        )
        self.table.empty_text = "No CPU fallbacks: " + no_fallback_reason(self.rank.trace)
        yield self.table
        yield Detail(id="detail")

    def show_row(self, row: int) -> None:
        pane = self.query_one("#detail", Detail)
        # nothing to detail: the table says what is absent and why
        pane.display = row >= 0
        if row < 0:
            return
        d = {k: v[row] for k, v in FALLBACKS.of(self.data).items()}
        rows = detail(
            ("call site", d["call_site"]),
            ("op", d["name"]),
            ("called as", d["chain"] if d["called_as"] != d["name"] else ""),
            ("calls", d["count"]),
            ("host time", f"{fmt_ns(d['total_ns'])} ({fmt_share(d['share'])} of wall time)"),
            ("copies forced", fmt_bytes(d["copy_bytes"]) if d["copy_bytes"] else ""),
            ("module", d["module"]),
            ("stack", "\n" + d["stack"] if d["stack"] else ""),
        )
        for f in self.rank.findings:
            ev = f.evidence or {}
            if f.kind == Kind.CPU_FALLBACK and f.call_site == d["call_site"] and ev.get("op") == d["name"]:
                rows += detail(("advice", f.advice))
                break
        pane.show(rows)

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        """Enter: every fallback at this line, longest first (t on one: the timeline)."""
        d = FALLBACKS.of(self.data)
        data = slices_table(self.rank.trace, d["rows"][event.row])
        what = f"fallbacks at {d['call_site'][event.row] or '(line unknown)'} of "
        self.app.push_screen(CallsScreen(self.rank, data, str(d["name"][event.row]), what))
