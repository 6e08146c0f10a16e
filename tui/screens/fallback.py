"""Fallback hot spots: CPU fallbacks grouped by call site and op, by host time, with module and stack."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widget import Widget

from neuron_prof.tui._fmt import fmt_bytes, fmt_int, fmt_ns, fmt_share
from neuron_prof.tui.screens._base import Detail, ViewScreen, detail
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable


class FallbackScreen(ViewScreen):
    """CPU-fallback hot spots: the call sites whose fallbacks cost the most host time."""

    VIEW = "fallback"

    def compose_body(self) -> Iterable[Widget]:
        cols = [
            Column("call_site", "call site", 0, lambda v: v or "(unknown site)"),
            Column("name", "op", 22),
            Column("count", "count", 7, fmt_int, right=True),
            Column("total_ns", "host time", 10, fmt_ns, right=True),
            Column("share", "share", 7, fmt_share, right=True),
            Column("copy_bytes", "copies", 10, fmt_bytes, right=True),
            Column("module", "module", 22),
        ]
        self.table = VirtualTable(cols, self.rank.fallbacks, filter_key="call_site", id="fallbacks")
        yield self.table
        yield Detail(id="detail")

    def show_row(self, row: int) -> None:
        pane = self.query_one("#detail", Detail)
        if row < 0:
            pane.show([("CPU fallbacks", "none recorded in this trace")])
            return
        d = {k: v[row] for k, v in self.rank.fallbacks.items()}
        rows = detail(
            ("call site", d["call_site"]),
            ("op", d["name"]),
            ("calls", d["count"]),
            ("host time", f"{fmt_ns(d['total_ns'])} ({fmt_share(d['share'])} of wall time)"),
            ("copies forced", fmt_bytes(d["copy_bytes"]) if d["copy_bytes"] else ""),
            ("module", d["module"]),
            ("stack", "\n" + d["stack"] if d["stack"] else ""),
        )
        for f in self.rank.findings:
            if f.kind == "cpu_fallback" and f.call_site and f.call_site == d["call_site"]:
                rows += detail(("advice", f.advice))
                break
        pane.show(rows)

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        self.action_jump()
