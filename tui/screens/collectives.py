"""Collectives: per (rank, op) count, bytes, time and bandwidth."""

from __future__ import annotations

from collections.abc import Iterable

from textual.widget import Widget

from neuron_prof.tui._absent import no_collective_reason
from neuron_prof.tui._fmt import fmt_bytes, fmt_gbps, fmt_int, fmt_ns
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable


class CollectivesScreen(ViewScreen):
    """Collective ops of every loaded rank, most time first."""

    VIEW = "collectives"

    def compose_body(self) -> Iterable[Widget]:
        cols = [
            Column("rank", "rank", 5, str, right=True),
            Column("name", "op", 0),
            Column("count", "count", 7, fmt_int, right=True),
            Column("bytes", "bytes", 11, fmt_bytes, right=True),
            Column("total_ns", "time", 10, fmt_ns, right=True),
            Column("gbps", "bandwidth", 11, fmt_gbps, right=True),
            Column("dtype", "dtype", 9),
            Column("group", "group", 12),
        ]
        self.table = VirtualTable(cols, self.data.collectives, filter_key="name", id="collectives")
        self.table.empty_text = "No collectives: " + no_collective_reason(self.rank.trace, len(self.data.ranks))
        yield self.table

    def ready(self) -> None:
        if self.table is not None:
            self.table.focus()

    def jump_target(self) -> tuple[int | None, int | None]:
        t = self.table
        if t is None or t.row < 0:
            return None, None
        if int(t.value("trace")) != self.data.current:
            self.np_app.select_rank(int(t.value("trace")))
        return int(t.value("ts_ns")), int(t.value("track"))

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        self.action_jump()
