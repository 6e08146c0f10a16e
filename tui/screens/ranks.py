"""Ranks: one row per loaded trace; enter makes that rank the one every view shows."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from neuron_prof.analysis.fmt import fmt_ns, fmt_share
from neuron_prof.model import Trace
from neuron_prof.tui._data import CrossTable
from neuron_prof.tui._shape import Table, objects, step_times
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable


def rank_table(ranks: Sequence[tuple[Trace, dict[str, Any]]]) -> Table:
    """One row per loaded trace (rank) from its analysis totals: wall, device busy, probe times, step."""

    def num(tot: dict[str, Any], key: str) -> float:
        v = tot.get(key)
        return float(v) if isinstance(v, (int, float)) else np.nan

    rows = []
    for i, (t, tot) in enumerate(ranks):
        st = step_times(t)
        rows.append(
            (
                t.rank if t.rank is not None else i,
                tot,
                float(np.median(st)) if len(st) else np.nan,
                str(t.metadata.get("source", "")),
            )
        )
    return {
        "rank": np.array([r[0] for r in rows], dtype=np.int64),
        **{
            k: np.array([num(r[1], k) for r in rows], dtype=np.float64)
            for k in ("wall_ns", "device_busy_share", "compile_ns", "fallback_ns", "sync_ns", "collective_ns")
        },
        "step_ns": np.array([r[2] for r in rows], dtype=np.float64),
        "source": objects([r[3] for r in rows]),
        "trace": np.arange(len(rows), dtype=np.int64),
    }


RANK_TABLE = CrossTable("rank_table", lambda ranks: rank_table([(r.trace, r.totals) for r in ranks]))


class RanksScreen(ViewScreen):
    """Per-rank totals side by side; the slowest median step stands out."""

    VIEW = "ranks"
    TITLE = "Ranks"
    HELP = "ranks"
    TABLES = (RANK_TABLE,)
    LOADING = "the rank table"
    JUMPS = False

    def compose_body(self) -> Iterable[Widget]:
        cols = [
            Column("rank", "rank", 5, str, right=True),
            Column("wall_ns", "wall", 10, fmt_ns, right=True),
            Column("step_ns", "median step", 12, fmt_ns, right=True),
            Column(
                "device_busy_share",
                "device busy",
                11,
                lambda v: "-" if math.isnan(v) else fmt_share(v),
                right=True,
                drop=1,
            ),
            # at 80 columns fallback and sync leave whole (their totals are on the overview), never "colle"
            Column("compile_ns", "compile", 10, fmt_ns, right=True),
            Column("fallback_ns", "fallback", 10, fmt_ns, right=True, drop=3),
            Column("sync_ns", "sync", 10, fmt_ns, right=True, drop=2),
            Column("collective_ns", "collectives", 11, fmt_ns, right=True),
            Column("source", "file", 0, min_width=10, clip_left=True),
        ]
        n = len(self.data.ranks)
        yield Static(
            Text(
                f"{n} rank{'s' if n != 1 else ''} loaded; showing {self.data.rank.rank_label} "
                "(enter on a row to show another)",
                style="dim",
            ),
            id="ranks-note",
        )
        self.table = VirtualTable(cols, RANK_TABLE.of(self.data), filter_key="source", id="ranks")
        yield self.table

    def ready(self) -> None:
        if self.table is not None:
            self.table.focus()
            self.table.move_to(self.data.current)

    def jump_target(self) -> tuple[int | None, int | None]:
        return None, None

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        self.np_app.select_rank(int(event.table.value("trace")))
        self.np_app.show_view("overview")
