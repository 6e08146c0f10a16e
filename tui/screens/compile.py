"""Compile stalls: compiles grouped by (op or graph, signature), by total cost, with recompile reasons."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widget import Widget

from neuron_prof.tui._fmt import fmt_int, fmt_ns
from neuron_prof.tui._shape import plan_text
from neuron_prof.tui.screens._base import Detail, ViewScreen, detail
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable

COMPILE_KINDS = ("first_call_compile", "recompile", "shape_churn")


class CompileScreen(ViewScreen):
    """Compile stalls by cost; the detail pane shows reasons, cache results and the bucket plan."""

    VIEW = "compile"

    def compose_body(self) -> Iterable[Widget]:
        cols = [
            Column("name", "op / graph", 0),
            Column("signature", "signature", 30),
            Column("total_ns", "total", 10, fmt_ns, right=True),
            Column("count", "count", 6, fmt_int, right=True),
            Column("max_ns", "longest", 10, fmt_ns, right=True),
            Column("call_site", "call site", 26, lambda v: v or "(unknown site)"),
        ]
        self.table = VirtualTable(cols, self.rank.compiles, filter_key="name", id="compiles")
        yield self.table
        yield Detail(id="detail")

    def show_row(self, row: int) -> None:
        pane = self.query_one("#detail", Detail)
        if row < 0:
            pane.show([("compiles", "none recorded in this trace")])
            return
        d = {k: v[row] for k, v in self.rank.compiles.items()}
        rows = detail(
            ("op / graph", d["name"]),
            ("signature", d["signature"]),
            ("compile kind", d["kind"]),
            ("total", fmt_ns(d["total_ns"])),
            ("compiles", d["count"]),
            ("cache", d["cache"]),
            ("call site", d["call_site"]),
            ("module", d["module"]),
            ("recompile reasons", "\n" + d["reasons"] if d["reasons"] else ""),
        )
        # the bucket plan and advice come from the analysis' findings on these compiles
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
        pane.show(rows)

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        self.action_jump()
