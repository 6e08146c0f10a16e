"""Per step: every profiled step as a stacked bar of its exclusive parts (compile, fallback, sync, collectives,
host, device, idle), all to one scale, like the report's "Per step" plot (the analysis' step breakdown,
`summary --json` step_breakdown). Opened from the overview with `b`; `m` switches to each step's parts as shares
of the bar; enter or t shows the step on the timeline. Under the legend, the highlighted step's critical path (the
first steps after warm-up have one: `analysis.efficiency.critical_path`): its host / device queue / collective
shares and heaviest slices."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.widgets import Static

from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.tui._data import RankData
from neuron_prof.tui._steps import BLOCK, STEP_PART_STYLE, path_text, step_bar, steps_table
from neuron_prof.tui.screens._drill import DrillScreen
from neuron_prof.tui.widgets.virtual_table import Column, VirtualTable


class StepsScreen(DrillScreen):
    """One row per step: its label ("w0" for a warm-up step), duration, bar and biggest parts."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("b", "app.pop_screen", "Back", show=False),
        Binding("t", "jump", "Timeline jump"),
        Binding("m", "scale", "Scale/shares"),
    ]
    TITLES = {True: "parts, to scale (m: shares)", False: "parts, shares (m: to scale)"}

    def __init__(self, rank: RankData) -> None:
        steps = rank.step_parts
        self.data = steps_table(steps)
        self.longest = int(self.data["dur_ns"].max()) if len(steps) else 0
        self.to_scale = True
        # narrow screens drop the biggest parts' text before the bar gets narrower than 20 cells
        cols = [
            Column("label", "step", 5, right=True),
            Column("dur_ns", "time", 9, fmt_ns, right=True),
            Column("parts", self.TITLES[True], 0, min_width=20,
                   bar=lambda parts, w: step_bar(parts, w, self.longest if self.to_scale else 0)),
            Column("top", "biggest parts", 32, drop=1),
        ]
        n_warm = sum(1 for s in steps if s.get("warmup"))
        subject = f"{len(steps):,} steps" + (f", {n_warm} warm-up (w)" if n_warm else "")
        super().__init__(rank, VirtualTable(cols, self.data, filter_key="label", id="steps"), "per step ", subject)

    def title_text(self) -> Text:
        title = Text(self.what, style="bold")
        title.append(self.subject)
        title.append(f"   longest {fmt_ns(self.longest)}", style="dim")
        return title

    def compose_head(self) -> Iterable[Widget]:
        """The legend: the parts some step has, in their colours."""
        legend = Text(no_wrap=True, overflow="ellipsis")
        for k, style in STEP_PART_STYLE.items():
            if any(s["parts"].get(k) for s in self.rank.step_parts):
                legend.append(BLOCK, style=style)
                legend.append(f" {k}  ")
        yield Static(legend, id="steps-legend")
        yield Static(self._path(), id="steps-path")

    def _path(self) -> Text:
        step = int(self.table.value("step")) if self.table.row >= 0 else -1
        return path_text(self.rank.critical_paths, step)

    def on_virtual_table_row_highlighted(self, event: VirtualTable.RowHighlighted) -> None:
        """The highlighted step's critical path under the legend."""
        self.query_one("#steps-path", Static).update(self._path())

    def action_scale(self) -> None:
        """m: bars to one scale (the longest step fills the column) or each step's parts as shares of it."""
        self.to_scale = not self.to_scale
        t = self.table
        t.columns = [replace(c, title=self.TITLES[self.to_scale]) if c.key == "parts" else c for c in t.columns]
        t.refresh()

    def action_jump(self) -> None:
        """t or enter: the highlighted step on the timeline."""
        if self.table.row >= 0:
            self.app.jump(int(self.table.value("ts_ns")))  # type: ignore[attr-defined]

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        self.action_jump()
