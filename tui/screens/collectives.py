"""Collectives: per (rank, op) count, bytes, time and bandwidth."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from textual.widget import Widget

from neuron_prof.analysis import Context, collective_args, collective_key, collective_rows, message_bytes
from neuron_prof.analysis.fmt import fmt_bytes, fmt_count, fmt_gbps, fmt_ns
from neuron_prof.model import Arg
from neuron_prof.tui._absent import no_collective_reason
from neuron_prof.tui._data import CrossTable
from neuron_prof.tui._shape import Table, arg_text, most_first, objects
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable

_SHOWN = (Arg.DTYPE, "dtype", Arg.GROUP, "Process Group Name")
"""The args keys the table shows besides those the analysis reads (`collective_args`)."""


def collective_table(contexts: Sequence[Context]) -> Table:
    """Collectives grouped by (rank, op): count, bytes, time, mean bandwidth; most time first; one analysis
    context per rank (the rank's own: its collective rows are worked out once).

    Rows, op names and byte counts are the analysis' own (probe track, else NCCL/RCCL kernels, else gloo); the
    args read as columns a window at a time (`collective_args`), not parsed one document at a time.
    """
    groups: dict[tuple[int, str], dict[str, Any]] = {}
    for i, ctx in enumerate(contexts):
        trace = ctx.trace
        rank = trace.rank if trace.rank is not None else i
        s = trace.slices
        rows = collective_rows(trace, ctx)
        rows = rows[np.argsort(s.ts_ns[rows], kind="stable")]
        names, ts, dur, track = s.name[rows].tolist(), s.ts_ns[rows].tolist(), s.dur_ns[rows].tolist(), s.track[rows].tolist()
        for k, a in enumerate(collective_args(ctx, rows, _SHOWN)):
            key = (rank, collective_key(trace.strings[names[k]], a))
            g = groups.setdefault(
                key,
                {
                    "count": 0,
                    "bytes": 0,
                    "total": 0,
                    "ts": ts[k],
                    "track": track[k],
                    "trace": i,
                    "dtype": arg_text(a.get(Arg.DTYPE, a.get("dtype"))),
                    "group": arg_text(a.get(Arg.GROUP, a.get("Process Group Name"))),
                },
            )
            g["count"] += 1
            g["bytes"] += message_bytes(a)
            g["total"] += dur[k]
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


COLLECTIVES = CrossTable("collectives", lambda ranks: collective_table([r.context for r in ranks]))


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
