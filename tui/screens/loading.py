"""Loading: a progress bar while the worker loads and analyses the traces."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Center, Middle
from textual.screen import Screen
from textual.widgets import ProgressBar, Static

from neuron_prof.tui._fmt import printable
from neuron_prof.tui.widgets.bars import KeyBar


class LoadingScreen(Screen[None]):
    """Shown until the traces are ready; `q` quits even while loading."""

    def compose(self) -> ComposeResult:
        with Middle(), Center():
            yield Static(Text("neuron-prof", style="bold"), id="loading-title")
            yield ProgressBar(total=100, show_eta=False, id="progress")
            yield Static(Text("starting", style="dim"), id="loading-status")
        yield KeyBar()

    def set_progress(self, fraction: float, what: str) -> None:
        self.query_one(ProgressBar).update(progress=round(100 * fraction))
        self.query_one("#loading-status", Static).update(Text(printable(what), style="dim"))
