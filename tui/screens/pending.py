"""Pending: a view whose tables are still being built says so, under the view tabs, until they are.

The overview comes from the first pass (`_data.prepare`); every other view's tables are built after it, in
the background (`TuiData.warm`). A switch to a view that is not ready yet shows this screen with that view's
tab highlighted; the app switches to the view itself once its tables are there (`NeuronProfApp.show_view`).
The tabs and the app's keys work meanwhile: another view, help or quit.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Static

from neuron_prof.analysis.fmt import printable
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.views import Views
from neuron_prof.tui.widgets.bars import KeyBar, ViewBar


def pending_text(label: str, what: str, since: float | None = None, failure: str | None = None) -> Text:
    """What the screen says about a view (`label`: its tab; `what`: its tables, `ViewScreen.LOADING`): loading,
    for how long, or why it cannot show."""
    t = Text()
    t.append(f"{label}: ", style="bold")
    if failure is not None:
        t.append(printable(failure, newlines=True), style="red")
        return t
    t.append(f"loading… ({what} are being computed; this view fills in when done)")
    if since is not None and (s := time.monotonic() - since) >= 1:
        t.append(f"  {s:.0f} s", style="dim")
    return t


class PendingScreen(Screen[None]):
    """Stands in for a view that is not ready: its tab highlighted, "loading…", then the view itself."""

    def __init__(self, views: Views) -> None:
        super().__init__()
        self.views = views
        self.view = ""
        self._since = time.monotonic()
        self._failure: str | None = None

    def compose(self) -> ComposeResult:
        yield ViewBar(self.views.tabs, self.view, id="views")
        yield Static(id="pending")
        yield KeyBar()

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick)
        self._tick()

    def wait_for(self, view: str, failure: str | None = None) -> None:
        """Show that `view` is loading (or, with `failure`, why it cannot be shown)."""
        if view != self.view:
            self._since = time.monotonic()
        self.view, self._failure = view, failure
        for bar in self.query(ViewBar):
            bar.active = view
            bar.refresh()
        self._tick()

    def _tick(self) -> None:
        label = dict(self.views.tabs).get(self.view, self.view)
        v = self.views.get(self.view)
        what = v.loading if v is not None else ViewScreen.LOADING
        for box in self.query("#pending").results(Static):
            box.update(pending_text(label, what, self._since, self._failure))

    def text(self) -> str:
        """The shown message (for tests)."""
        return "".join(str(s.render()) for s in self.query("#pending").results(Static))

    def on_screen_resume(self) -> None:
        # back from the help: the tables may have come meanwhile
        self.app.catch_up_waiting()  # type: ignore[attr-defined]

    def on_view_bar_chosen(self, event: ViewBar.Chosen) -> None:
        event.stop()
        self.app.show_view(event.view)  # type: ignore[attr-defined]
