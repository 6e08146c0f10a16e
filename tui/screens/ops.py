"""Ops: host and device ops by self time (filter with `/`); enter lists every call of an op. A host op with
counted calls has its achieved TFLOP/s, MFU and FLOP/B (`analysis.efficiency.rates.op_efficiency`).

Both tables show the analysis' op accounting (`neuron_prof.analysis.op_table`), the numbers of `summary`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

import numpy as np
from textual.binding import Binding, BindingType
from textual.widget import Widget

from neuron_prof.analysis import OpTable
from neuron_prof.analysis.efficiency.rates import op_efficiency
from neuron_prof.analysis.fmt import fmt_count, fmt_mfu, fmt_ns, fmt_rate, fmt_ts
from neuron_prof.model import Trace
from neuron_prof.tui._data import RankData, RankTable
from neuron_prof.tui._shape import Table
from neuron_prof.tui.screens._drill import DrillScreen
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable


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


def efficiency_columns(drop: int) -> list[Column]:
    """Achieved TFLOP/s, share of the device's peak (MFU) and arithmetic intensity (FLOP/B) of a line or an op
    (`Efficiency.columns`): blank where no device time was measured (or no peak is known), never 0; they leave
    narrow screens from `drop` + 2 down (the intensity first)."""
    return [Column("tflops", "TFLOP/s", 10, fmt_rate, right=True, drop=drop),
            Column("mfu", "MFU", 7, fmt_mfu, right=True, drop=drop + 1),
            Column("intensity", "FLOP/B", 7, fmt_rate, right=True, drop=drop + 2)]


def op_efficiency_view(rank: RankData, ops: Table) -> Table:
    """`op_view`'s rows with the efficiency columns of their op (`op_efficiency`, host ops by op key; NaN for a
    device op, an op with no counted call or no device time)."""
    eff = op_efficiency(rank.context)
    cols = eff.columns()
    at = {str(n): i for i, n in enumerate(eff.name.tolist())}
    idx = np.array([at.get(str(n), -1) if w == "host" else -1 for n, w in zip(ops["name"], ops["where"])],
                   dtype=np.int64)
    return {**ops, **{k: np.where(idx >= 0, v[np.maximum(idx, 0)] if len(v) else np.nan, np.nan)
                      for k, v in cols.items()}}


# built first after the overview, before the other views' tables
OPS = RankTable("ops", lambda rank: op_view(rank.trace, rank.op_accounting), first=True)
OP_EFFICIENCY = RankTable("op_efficiency", lambda rank: op_efficiency_view(rank, rank.table(OPS)))


class OpsScreen(ViewScreen):
    """Every op name with its self and total time; `s` changes the sort column."""

    VIEW = "ops"
    TITLE = "Ops"
    HELP = "ops"
    TABLES = (OPS, OP_EFFICIENCY)
    LOADING = "the op table"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right", "pan(8)", "Scroll names", key_display="←→"),
        Binding("left", "pan(-8)", "Scroll names", show=False),
    ]

    def compose_body(self) -> Iterable[Widget]:
        # narrow screens drop the efficiency columns, mean, then calls, then "on": whole columns, never a cut
        # number or header
        cols = [
            Column("name", "op", 0, min_width=24),
            Column("where", "on", 6, drop=1),
            Column("self_ns", "self", 9, fmt_ns, right=True),
            Column("total_ns", "total", 9, fmt_ns, right=True),
            Column("count", "calls", 8, fmt_count, right=True, drop=2),
            Column("avg_ns", "mean", 9, fmt_ns, right=True, drop=3),
            *efficiency_columns(drop=4),
        ]
        self.table = VirtualTable(cols, OP_EFFICIENCY.of(self.data), filter_key="name", id="ops")
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
        calls = calls_table(self.rank.trace, self.rank.op_accounting, int(t.value("op")))
        self.app.push_screen(CallsScreen(self.rank, calls, str(t.value("name"))))


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
