"""Lines: where the time goes, per line of the user's code (the analysis' lines view, `summary --json` lines).

One row per line: host time (and the part in the backward of the line's ops), device, compile, fallback,
sync and collective time, memory allocated, and the line's achieved TFLOP/s, MFU and FLOP/B (blank where no
device time was measured). The detail pane shows the line's source in context (when the
file is found) and what its backward ran; enter lists the line's ops (forward and backward apart)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from rich.text import Text
from textual.widget import Widget
from textual.widgets import Static

from neuron_prof.analysis import sites_of, source_context
from neuron_prof.analysis.efficiency.rates import line_efficiency
from neuron_prof.analysis.fmt import cut, fmt_bytes, fmt_count, fmt_mfu, fmt_ns, fmt_rate, printable
from neuron_prof.tui._data import RankData, RankTable
from neuron_prof.tui._lines import calls_of, line_ops, lines_view
from neuron_prof.tui.screens._drill import DrillScreen
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.screens.ops import CallsScreen, efficiency_columns
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable

LINES = RankTable("lines", lambda rank: {**lines_view(rank.line_table), **line_efficiency(rank.context).columns()})


def _ns(v: object) -> str:
    return fmt_ns(float(v)) if v else "-"  # type: ignore[arg-type]


def _bytes(v: object) -> str:
    return fmt_bytes(float(v)) if v else "-"  # type: ignore[arg-type]



class LinesScreen(ViewScreen):
    """The user's lines by cost; enter lists a line's ops, the detail pane shows its source."""

    VIEW = "lines"
    TITLE = "Lines"
    HELP = "lines (your code's lines by cost)"
    TABLES = (LINES,)
    LOADING = "the lines table"
    JUMPS = False

    def compose_body(self) -> Iterable[Widget]:
        # narrow screens drop memory, collectives, sync, fallback, compile, then the backward part
        cols = [
            Column("call_site", "line", 0, min_width=24, clip_left=True),
            Column("host_ns", "host", 9, _ns, right=True),
            Column("host_backward_ns", "in bwd", 9, _ns, right=True, drop=5),
            Column("device_ns", "device", 9, _ns, right=True),
            Column("compile_ns", "compile", 9, _ns, right=True, drop=4),
            Column("fallback_ns", "fallback", 9, _ns, right=True, drop=3),
            Column("sync_ns", "sync", 9, _ns, right=True, drop=6),
            Column("collective_ns", "coll.", 9, _ns, right=True, drop=7),
            Column("alloc_bytes", "alloc", 9, _bytes, right=True, drop=8),
            Column("backward", "backward of", 22, drop=9),
            *efficiency_columns(drop=10),
        ]
        self.table = VirtualTable(cols, LINES.of(self.data), filter_key="call_site", id="lines")
        self.table.sort_key = "cost_ns"
        self.table.empty_text = "No line of your code ran a recorded op (no host ops, or no call stacks)."
        yield self.table
        yield Static(id="source")

    def show_row(self, row: int) -> None:
        pane = self.query_one("#source", Static)
        pane.display = row >= 0
        if row < 0:
            return
        t = self.rank.line_table
        i = int(LINES.of(self.data)["index"][row])
        out = Text(no_wrap=True, overflow="ellipsis")
        site = str(t.call_site[i])
        ctx = source_context(site, self.rank.trace.metadata, around=2) if site else []
        line = int(site.rsplit(":", 1)[1]) if ctx else 0
        for k, (ln, text) in enumerate(ctx):
            if k:
                out.append("\n")
            out.append(f"{ln:>5} ", style="bold" if ln == line else "dim")
            out.append(printable(text), style="bold" if ln == line else "")
        if not ctx:
            out.append(printable(t.label(i)), style="bold")
            out.append("  (source file not found here)" if site else "", style="dim")
        extra = []
        eff = LINES.of(self.data)
        if not np.isnan(eff["tflops"][row]):  # the efficiency columns leave narrow screens: here too
            extra.append(f"{fmt_rate(eff['tflops'][row])} TFLOP/s"
                         + (f", MFU {fmt_mfu(eff['mfu'][row])}" if not np.isnan(eff["mfu"][row]) else "")
                         + (f", {fmt_rate(eff['intensity'][row])} FLOP/B" if not np.isnan(eff["intensity"][row])
                            else ""))
        if t.backward_of[i]:
            extra.append(f"+ backward: {', '.join(t.backward_of[i])}")
        c = t.cols
        if c["compiles"][i]:
            extra.append(f"{fmt_count(c['compiles'][i])} compiles: {'; '.join(t.signatures[i][:3])}")
        if extra:  # one line, cut at the screen's edge (the signatures are in summary --json)
            line_text = "   ".join(printable(x) for x in extra)
            w = max(20, self.app.size.width - 3)
            out.append("\n")
            out.append(cut(line_text, w), style="dim")
        pane.update(out)

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        i = int(LINES.of(self.data)["index"][event.row])
        self.app.push_screen(LineOpsScreen(self.rank, i))


class LineOpsScreen(DrillScreen):
    """The ops of one line (forward and backward apart), most self time first; enter lists an op's calls."""

    def __init__(self, rank: RankData, line: int) -> None:
        t = rank.line_table
        self.line = line
        self.label = t.label(line)
        self.data = line_ops(rank.trace, t, line, sites_of(rank.context))
        cols = [
            Column("name", "op", 0, min_width=24),
            Column("where", "in", 30, drop=1),
            Column("count", "calls", 8, fmt_count, right=True),
            Column("self_ns", "self", 10, fmt_ns, right=True),
        ]
        super().__init__(rank, VirtualTable(cols, self.data, filter_key="name", id="line-ops"), "ops of ",
                         self.label)

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        d = self.data
        calls = calls_of(self.rank.trace, self.rank.line_table, self.line, d["members"][event.row])
        what = f"{d['where'][event.row]} calls at {self.label} of "
        self.app.push_screen(CallsScreen(self.rank, calls, str(d["name"][event.row]), what))
