"""Memory: one curve per memory counter track, with its peak and when it happened."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from neuron_prof.analysis.fmt import fmt_bytes, fmt_ts, printable
from neuron_prof.model import Trace, TrackKind
from neuron_prof.tui._data import RankTable
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.widgets.plot import BraillePlot
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable


def memory_series(trace: Trace) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """(track, ts_ns, value) per memory counter track (bytes), in time order."""
    c = trace.counters
    out = []
    for t in trace.track_ids(TrackKind.MEMORY):
        rows = np.flatnonzero(c.track == t)
        if len(rows):
            rows = rows[np.argsort(c.ts_ns[rows], kind="stable")]
            out.append((int(t), c.ts_ns[rows], c.value[rows]))
    return out


MEMORY = RankTable("memory", lambda rank: memory_series(rank.trace))


class MemoryScreen(ViewScreen):
    """Memory counters: a table of peaks (t jumps to the peak) and the highlighted curve."""

    VIEW = "memory"
    TITLE = "Memory"
    HELP = "memory"
    TABLES = (MEMORY,)
    LOADING = "the memory series"

    def compose_body(self) -> Iterable[Widget]:
        rank = self.rank
        series = MEMORY.of(self.data)
        tracks = rank.trace.tracks
        peak_i = [int(np.argmax(v)) for _, _, v in series]
        obj = np.empty(len(series), dtype=object)
        obj[:] = [tracks[t].name for t, _, _ in series]
        data = {
            "name": obj,
            "peak": np.array([v[i] for (_, _, v), i in zip(series, peak_i)], dtype=np.float64),
            "ts_ns": np.array([ts[i] for (_, ts, _), i in zip(series, peak_i)], dtype=np.int64),
            "last": np.array([v[-1] for _, _, v in series], dtype=np.float64),
            "samples": np.array([len(v) for _, _, v in series], dtype=np.int64),
            "track": np.array([t for t, _, _ in series], dtype=np.int64),
            "series": np.arange(len(series), dtype=np.int64),
        }
        origin = rank.origin
        cols = [
            Column("name", "counter", 0),
            Column("peak", "peak", 12, fmt_bytes, right=True),
            Column("ts_ns", "peak at", 16, lambda v: fmt_ts(v, origin), right=True),
            Column("last", "at end", 12, fmt_bytes, right=True),
            Column("samples", "samples", 8, str, right=True),
        ]
        self.table = VirtualTable(cols, data, filter_key="name", id="memory-table")
        yield self.table
        yield Static(id="plot-title")
        x, y = (series[0][1], series[0][2]) if series else (np.zeros(0), np.zeros(0))
        self.plot = BraillePlot(x, y, id="plot")
        yield self.plot

    def show_row(self, row: int) -> None:
        title = self.query_one("#plot-title", Static)
        if row < 0:
            title.update(Text("no memory counters in this trace", style="dim"))
            return
        _, ts, v = MEMORY.of(self.data)[int(self.table.value("series", row))]  # type: ignore[union-attr]
        self.plot.set_data(ts, v)
        t = Text()
        t.append(printable(self.table.value("name", row)), style="bold")  # type: ignore[union-attr]
        t.append(
            f"  peak {fmt_bytes(float(v.max()))} at {fmt_ts(int(ts[int(np.argmax(v))]), self.rank.origin)}"
            f"  (0 to {fmt_bytes(float(v.max()))}, {fmt_ts(int(ts[0]), self.rank.origin)} .. "
            f"{fmt_ts(int(ts[-1]), self.rank.origin)})",
            style="dim",
        )
        title.update(t)

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        self.action_jump()
