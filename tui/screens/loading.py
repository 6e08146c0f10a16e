"""Loading: a progress bar while the worker loads and analyses the traces."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Center, Middle
from textual.screen import Screen
from textual.widgets import ProgressBar, Static

from neuron_prof.analysis.fmt import printable
from neuron_prof.tui.widgets.bars import KeyBar


class LoadingScreen(Screen[None]):
    """Shown until the traces are ready; `q` quits even while loading.

    The loaders report no progress inside one file, so the status line counts the seconds of the
    current step: a 300 MB JSON takes several, and a frozen-looking screen is worse than a slow one.
    """

    def __init__(self) -> None:
        super().__init__()
        self._what = "starting"
        self._since = time.monotonic()

    def compose(self) -> ComposeResult:
        with Middle(), Center():
            yield Static(Text("neuron-prof", style="bold"), id="loading-title")
            yield ProgressBar(total=100, show_eta=False, id="progress")
            yield Static(Text("starting", style="dim"), id="loading-status")
        yield KeyBar()

    def on_mount(self) -> None:
        self.set_interval(0.25, self._tick)

    def set_progress(self, fraction: float, what: str) -> None:
        self.query_one(ProgressBar).update(progress=round(100 * fraction))
        self._what, self._since = what, time.monotonic()
        self._tick()

    def _tick(self) -> None:
        elapsed = time.monotonic() - self._since
        line = printable(self._what) + (f"  {elapsed:.0f} s" if elapsed >= 1 else "")
        self.query_one("#loading-status", Static).update(Text(line, style="dim"))
