"""Compile stalls: compiles by op (or graph) with totals, most total time first; enter expands an op to its
(signature, call site) groups; the detail pane shows the full signature, the line, module and stack."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.widget import Widget

from neuron_prof.analysis import Family, of_family
from neuron_prof.analysis.fmt import fmt_count, fmt_ns
from neuron_prof.tui._data import RankTable
from neuron_prof.tui.screens._compile_table import compile_table, no_compile_reason, plan_text
from neuron_prof.tui.screens.base import Detail, ViewScreen, detail
from neuron_prof.tui.screens.ops import CallsScreen, slices_table
from neuron_prof.tui.widgets.tree_table import TreeTable
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable

COMPILE_KINDS = of_family(Family.COMPILE)
COMPILES = RankTable("compiles", lambda rank: compile_table(rank.trace, rank.context))


def _count(v: Any) -> str:
    return fmt_count(v) if v else ""


class CompileScreen(ViewScreen):
    """Compile stalls by op; each op expands to its signatures and call sites."""

    VIEW = "compile"
    TITLE = "Compile stalls"
    HELP = "compile stalls"
    TABLES = (COMPILES,)
    LOADING = "the compile stalls"

    def compose_body(self) -> Iterable[Widget]:
        cols = [
            Column("label", "op / graph ▸ signature", 0, min_width=36),
            Column("where", "call site", 20, clip_left=True, grow=24),
            Column("n_sigs", "sigs", 5, _count, right=True, drop=2),
            Column("n_sites", "sites", 5, _count, right=True, drop=3),
            Column("count", "count", 6, fmt_count, right=True),
            Column("total_ns", "total", 10, fmt_ns, right=True),
            Column("max_ns", "longest", 10, fmt_ns, right=True, drop=1),
        ]
        self.table = TreeTable(cols, COMPILES.of(self.data), filter_key="search", id="compiles")
        self.table.empty_text = "No compiles: " + no_compile_reason(self.rank.trace)
        yield self.table
        yield Detail(id="detail")

    @property
    def tree_table(self) -> TreeTable:
        assert isinstance(self.table, TreeTable)
        return self.table

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        """Enter: expand or collapse an op; on a signature row, list its compiles (t on one: the timeline)."""
        event.stop()
        d = self.tree_table.data
        if d["parent"][event.row] >= 0:
            what = f"compiles at {d['where'][event.row]} of "
            data = slices_table(self.rank.trace, d["rows"][event.row])
            self.app.push_screen(CallsScreen(self.rank, data, f"{d['name'][event.row]} {d['signature'][event.row]}", what))
        else:
            self.tree_table.toggle(event.row)

    def focus_key(self, key: str) -> bool:
        """Highlight the costliest signature at call site `key` (its op expanded), else an op named `key`."""
        t = self.tree_table
        d = t.data
        hits = [r for r in range(t.n_rows) if d["parent"][r] >= 0 and d["call_site"][r] == key]
        if not hits:
            return super().focus_key(key)
        t.reveal(max(hits, key=lambda r: int(d["total_ns"][r])))
        return True

    def show_row(self, row: int) -> None:
        pane = self.query_one("#detail", Detail)
        # nothing to detail: the table says what is absent and why
        pane.display = row >= 0
        if row < 0:
            return
        d = {k: v[row] for k, v in COMPILES.of(self.data).items()}
        member = d["parent"] >= 0
        site = d["call_site"] or "line unknown" + (f" in {d['function']}" if d["function"] else "")
        if not member and d["n_sites"] != 1:
            site = f"{d['n_sites']} call sites (enter lists them)"
        counts = f"{fmt_count(d['count'])}, {fmt_ns(d['total_ns'])} in all, longest {fmt_ns(d['max_ns'])}"
        rows = detail(
            ("op / graph", d["name"]),
            ("signature", d["signature"]),
            ("call site", site),
            ("why no line", d["site_reason"]),
            ("module", d["module"]),
            ("stack (outermost first)", "\n" + d["stack"] if d["stack"] else ""),
            ("compiles", counts),
            ("this graph's compiles", "\n" + d["parts"] if d["parts"] else ""),
            ("signatures", "" if member else f"{d['n_sigs']} (enter lists them)"),
            ("compile kind", d["kind"]),
            ("cache", d["cache"]),
            ("recompile reasons", "\n" + d["reasons"] if d["reasons"] else ""),
        )
        pane.show(rows + self._findings(d))

    def _findings(self, d: dict[str, Any]) -> list[tuple[str, str]]:
        """The compile findings about these compiles: their titles, advice and bucket plans."""
        rows: list[tuple[str, str]] = []
        mine = set(d["rows"])
        for f in self.rank.findings:
            ev = f.evidence or {}
            if f.kind not in COMPILE_KINDS or not (
                mine & set(ev.get("rows") or ())
                or ev.get("subject") == d["name"]
                or d["name"] in (ev.get("ops") or ())
            ):
                continue
            rows += detail((f.kind, f.title), ("advice", f.advice))
            if isinstance(ev.get("plan"), dict):
                rows += detail(("bucket plan", plan_text(ev["plan"])))
                others = [plan_text(p) for p in ev.get("plans") or () if isinstance(p, dict)]
                if others:
                    rows += detail(("other plans", "\n" + "\n".join(others)))
        return rows
