"""Help: every key, in a modal. The views' lines come from the view registry (`neuron_prof.tui.views`): the
"switch view" line names every view on the bar by its HELP, and a view off the bar has a line of its own."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from neuron_prof.tui.views import Views

KEYS = (
    ("↑ ↓ pgup pgdn home end", "move in a table"),
    (
        "enter",
        "drill in: a finding opens its view filtered to it (esc clears the filter), an op lists its calls, "
        "a compile signature lists its compiles, a fallback line its fallbacks, a line of yours its ops "
        "(forward and backward apart), a rank becomes the shown "
        "rank; in compile stalls an op expands to its signatures and call sites",
    ),
    ("→ ←", "compile stalls: expand / collapse the highlighted op"),
    ("shift+↓ shift+↑", "scroll the detail pane under a table (on a short screen the advice goes on below)"),
    ("t", "jump to the highlighted row's place and time on the timeline"),
    ("/", "filter the table (enter keeps the filter, esc clears it)"),
    ("s", "sort the table by the next numeric column"),
    ("timeline ← →", "move the cursor one cell;  shift+← →: pan;  + - or the wheel: zoom;  0: the profiled steps"),
    ("timeline ↑ ↓", "select a lane;  [ ]: previous / next slice on it"),
    ("timeline /", "search slices by name;  n / N: next / previous match;  esc clears"),
    ("timeline enter", "the selected slice: arguments, call site, linked slices;  f: follow its flow"),
    ("b", "overview: every profiled step as a bar of its parts (compile, fallback, sync, collectives, host, "
          "device, idle);  m: to one scale / as shares;  enter: the step on the timeline"),
)
"""The keys within views, after the "switch view" line."""
APP_KEYS = (
    ("o", "how to open this trace in the Perfetto UI"),
    ("?", "this help"),
    ("q", "quit"),
)
"""The app's own keys, last."""


def key_span(keys: list[str]) -> str:
    """Hotkeys as the help writes them: a run of consecutive digits as "1-9", the others one by one."""
    out: list[str] = []
    run: list[str] = []
    for k in [*keys, ""]:
        if run and k.isdigit() and len(k) == 1 and ord(k) == ord(run[-1]) + 1:
            run.append(k)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 2 else ", ".join(run))
        run = [k] if k.isdigit() and len(k) == 1 else []
        if k and not run:
            out.append(k)
    return ", ".join(out)


def help_rows(views: Views) -> list[tuple[str, str]]:
    """(keys, what they do): switching views, the keys within them, the views off the bar, the app's keys."""
    tabs = [v for v in views if v.tab]
    switch = (f"{key_span([v.hotkey for v in tabs])}, tab, shift+tab",
              "switch view: " + ", ".join(v.help for v in tabs))
    return [switch, *KEYS, *((v.hotkey, v.help) for v in views if not v.tab), *APP_KEYS]


class HelpScreen(ModalScreen[None]):
    """The key reference; any of esc, q or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def __init__(self, views: Views) -> None:
        super().__init__()
        self.views = views

    def compose(self) -> ComposeResult:
        # a grid, not padded lines: at 80 columns the descriptions wrap beside their keys
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold cyan", justify="right", no_wrap=True)
        grid.add_column(overflow="fold")
        for k, v in help_rows(self.views):
            grid.add_row(k, v)
        title = Text("neuron-prof keys", style="bold")
        title.append("   ↑↓ pgup pgdn scroll, esc closes", style="dim")
        with VerticalScroll(id="help"):
            yield Static(title)
            yield Static(grid)
