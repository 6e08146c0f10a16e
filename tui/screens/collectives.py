"""Collectives: per (rank, op) count, bytes, time and bandwidth."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from textual.widget import Widget

from neuron_prof.analysis import Context, collective_key, collective_rows, message_bytes
from neuron_prof.analysis.fmt import fmt_bytes, fmt_count, fmt_gbps, fmt_ns
from neuron_prof.model import Arg, Trace
from neuron_prof.tui._absent import no_collective_reason
from neuron_prof.tui._data import CrossTable
from neuron_prof.tui._shape import Table, arg_text, most_first, objects
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable


def collective_table(traces: Sequence[Trace]) -> Table:
    """Collectives grouped by (rank, op): count, bytes, time, mean bandwidth; most time first.

    Rows, op names and byte counts are the analysis' own (probe track, else NCCL/RCCL kernels, else gloo).
    """
    groups: dict[tuple[int, str], dict[str, Any]] = {}
    for i, trace in enumerate(traces):
        rank = trace.rank if trace.rank is not None else i
        s = trace.slices
        rows = collective_rows(trace, Context(trace))
        for r in rows[np.argsort(s.ts_ns[rows], kind="stable")]:
            a = trace.slice_args(int(r))
            key = (rank, collective_key(trace.slice_name(int(r)), a))
            g = groups.setdefault(
                key,
                {
                    "count": 0,
                    "bytes": 0,
                    "total": 0,
                    "ts": int(s.ts_ns[r]),
                    "track": int(s.track[r]),
                    "trace": i,
                    "dtype": arg_text(a.get(Arg.DTYPE, a.get("dtype"))),
                    "group": arg_text(a.get(Arg.GROUP, a.get("Process Group Name"))),
                },
            )
            g["count"] += 1
            g["bytes"] += message_bytes(a)
            g["total"] += int(s.dur_ns[r])
    vals = list(groups.values())
    total = np.array([g["total"] for g in vals], dtype=np.int64)
    nbytes = np.array([g["bytes"] for g in vals], dtype=np.int64)
    t: Table = {
        "rank": np.array([k[0] for k in groups], dtype=np.int64),
        "name": objects([k[1] for k in groups]),
        "count": np.array([g["count"] for g in vals], dtype=np.int64),
        "bytes": nbytes,
        "total_ns": total,
        # bytes per ns is GB/s; no byte count (many Kineto traces) shows as no bandwidth
        "gbps": np.where((total > 0) & (nbytes > 0), nbytes / np.maximum(total, 1), np.nan),
        "dtype": objects([g["dtype"] for g in vals]),
        "group": objects([g["group"] for g in vals]),
        "ts_ns": np.array([g["ts"] for g in vals], dtype=np.int64),
        "track": np.array([g["track"] for g in vals], dtype=np.int64),
        "trace": np.array([g["trace"] for g in vals], dtype=np.int64),
    }
    return most_first(t, "total_ns")


COLLECTIVES = CrossTable("collectives", lambda ranks: collective_table([r.trace for r in ranks]))


class CollectivesScreen(ViewScreen):
    """Collective ops of every loaded rank, most time first."""

    VIEW = "collectives"
    TITLE = "Collectives"
    HELP = "collectives"
    TABLES = (COLLECTIVES,)
    LOADING = "the collectives of every rank"

    def compose_body(self) -> Iterable[Widget]:
        cols = [
            Column("rank", "rank", 5, str, right=True),
            Column("name", "op", 0),
            Column("count", "count", 7, fmt_count, right=True),
            Column("bytes", "bytes", 11, fmt_bytes, right=True),
            Column("total_ns", "time", 10, fmt_ns, right=True),
            Column("gbps", "bandwidth", 11, fmt_gbps, right=True),
            Column("dtype", "dtype", 9),
            Column("group", "group", 12),
        ]
        self.table = VirtualTable(cols, COLLECTIVES.of(self.data), filter_key="name", id="collectives")
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
