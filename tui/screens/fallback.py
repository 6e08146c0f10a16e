"""Fallback hot spots: CPU fallbacks grouped by call site and op, by host time, with module and stack.

Each row names the op the user's code called and the op that fell back ("aten::linalg_svdvals →
aten::_linalg_svd"); `/` matches either, as users write them too ("torch.linalg.svdvals", "Tensor.sort"):
the rule of `neuron-prof check --forbid-fallback` (`neuron_prof.analysis.norm_op`)."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widget import Widget

from neuron_prof.analysis import Kind, norm_op
from neuron_prof.tui._absent import no_fallback_reason
from neuron_prof.tui._fmt import fmt_bytes, fmt_int, fmt_ns, fmt_share
from neuron_prof.tui._shape import slices_table
from neuron_prof.tui.screens.base import Detail, ViewScreen, detail
from neuron_prof.tui.screens.ops import CallsScreen
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable


class FallbackScreen(ViewScreen):
    """CPU-fallback hot spots: the call sites whose fallbacks cost the most host time."""

    VIEW = "fallback"

    def compose_body(self) -> Iterable[Widget]:
        cols = [
            Column("call_site", "call site", 20, lambda v: v or "(line unknown)", clip_left=True, grow=24),
            Column("chain", "called as → op that fell back", 0, min_width=40),
            Column("count", "count", 6, fmt_int, right=True),
            Column("total_ns", "host time", 9, fmt_ns, right=True),
            Column("share", "share", 7, fmt_share, right=True, drop=2),
            Column("copy_bytes", "copies", 10, fmt_bytes, right=True, drop=3),
            Column("module", "module", 22, clip_left=True, drop=4),
        ]
        self.table = VirtualTable(
            cols, self.rank.fallbacks, filter_key="names", queries=lambda q: (q, norm_op(q)), id="fallbacks"
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
        d = {k: v[row] for k, v in self.rank.fallbacks.items()}
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
        d = self.rank.fallbacks
        data = slices_table(self.rank.trace, d["rows"][event.row])
        what = f"fallbacks at {d['call_site'][event.row] or '(line unknown)'} of "
        self.app.push_screen(CallsScreen(self.rank, data, str(d["name"][event.row]), what))
