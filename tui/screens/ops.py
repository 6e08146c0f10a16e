"""Ops: host and device ops by self time (filter with `/`); enter lists every call of an op.

Both tables show the analysis' op accounting (`neuron_prof.analysis.op_table`), the numbers of `summary`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import numpy as np
from textual.binding import Binding, BindingType
from textual.widget import Widget

from neuron_prof.tui._data import RankData
from neuron_prof.tui._fmt import fmt_int, fmt_ns, fmt_ts
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.screens._drill import DrillScreen
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable


class OpsScreen(ViewScreen):
    """Every op name with its self and total time; `s` changes the sort column."""

    VIEW = "ops"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right", "pan(8)", "Scroll names", key_display="←→"),
        Binding("left", "pan(-8)", "Scroll names", show=False),
    ]

    def compose_body(self) -> Iterable[Widget]:
        # narrow screens drop mean, then calls, then "on": whole columns, never a cut number or header
        cols = [
            Column("name", "op", 0, min_width=24),
            Column("where", "on", 6, drop=1),
            Column("self_ns", "self", 9, fmt_ns, right=True),
            Column("total_ns", "total", 9, fmt_ns, right=True),
            Column("count", "calls", 8, fmt_int, right=True, drop=2),
            Column("avg_ns", "mean", 9, fmt_ns, right=True, drop=3),
        ]
        self.table = VirtualTable(cols, self.rank.ops, filter_key="name", id="ops")
        self.table.sort_key = "self_ns"
        yield self.table

    def ready(self) -> None:
        if self.table is not None:
            self.table.focus()

    def action_pan(self, cells: int) -> None:
        """← →: scroll the op names (C++ kernel names run to hundreds of characters)."""
        if self.table is not None:
            self.table.action_pan(cells)

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        t = event.table
        self.app.push_screen(CallsScreen(self.rank, self.rank.calls(int(t.value("op"))), str(t.value("name"))))


class CallsScreen(DrillScreen):
    """Every call of one op, longest first (a virtual table: a million calls page like ten): the calls the
    ops view counts, so an op re-dispatched under itself is listed once, with its outer span's times.
    The compile and fallback views list the compiles of a signature and the fallbacks at a line here too."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("t", "jump", "Timeline jump")]

    def __init__(self, rank: RankData, data: dict[str, np.ndarray], name: str, what: str = "calls of ") -> None:
        tracks = rank.trace.tracks
        origin = rank.origin
        cols = [
            Column("ts_ns", "start", 16, lambda v: fmt_ts(v, origin), right=True),
            Column("dur_ns", "duration", 10, fmt_ns, right=True),
            Column("self_ns", "self", 10, fmt_ns, right=True),
            Column("track", "track", 0, lambda v: tracks[int(v)].name),
        ]
        super().__init__(rank, VirtualTable(cols, data, filter_key="track", id="calls"), what, name)
        self.op_name = name

    def action_jump(self) -> None:
        if self.table.row >= 0:
            self.app.jump(  # type: ignore[attr-defined]
                int(self.table.value("ts_ns")), int(self.table.value("track")), int(self.table.value("row"))
            )

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        self.action_jump()
