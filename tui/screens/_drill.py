"""DrillScreen: what every drill-in list pushed over a view shares (an op's calls, a line's ops, the steps): a
title line, one table, the key bar; esc or backspace goes back.

A subclass builds `self.table` in its `__init__` and passes the title's parts; `compose_head()` adds lines
between the title and the table (a legend).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from neuron_prof.analysis.fmt import printable
from neuron_prof.tui._data import RankData
from neuron_prof.tui.widgets.bars import KeyBar
from neuron_prof.tui.widgets.virtual_table import VirtualTable


class DrillScreen(Screen[None]):
    """A list of one subject's rows: "<what><subject>  (<rows>)" above its table."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,backspace", "app.pop_screen", "Back")]

    def __init__(self, rank: RankData, table: VirtualTable, what: str, subject: str) -> None:
        super().__init__()
        self.rank = rank
        self.table = table
        self.what = what
        self.subject = subject

    def title_text(self) -> Text:
        """The title line: what the rows are (bold), the subject (a trace string, shown literally) and the
        number of rows."""
        title = Text(self.what, style="bold")
        title.append(printable(self.subject))
        title.append(f"  ({len(self.table.order):,})", style="dim")
        return title

    def compose_head(self) -> Iterable[Widget]:
        """Lines between the title and the table (none by default)."""
        return ()

    def compose(self) -> ComposeResult:
        yield Static(self.title_text(), id="calls-title")
        yield from self.compose_head()
        yield self.table
        yield KeyBar()

    def on_mount(self) -> None:
        self.table.focus()
