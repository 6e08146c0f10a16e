"""Help: every key, in a modal."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

KEYS = (
    (
        "1-9, tab, shift+tab",
        "switch view: overview, compile stalls, fallback hot spots, ops, timeline, memory, "
        "collectives, ranks, lines (your code's lines by cost)",
    ),
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
    ("d", "device view: a Neuron Explorer device profile's schema version, MFU/HFU/MBU, engine shares, "
          "opcodes and device time per framework op, source line and host op"),
    ("o", "how to open this trace in the Perfetto UI"),
    ("?", "this help"),
    ("q", "quit"),
)


class HelpScreen(ModalScreen[None]):
    """The key reference; any of esc, q or ? closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        # a grid, not padded lines: at 80 columns the descriptions wrap beside their keys
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold cyan", justify="right", no_wrap=True)
        grid.add_column(overflow="fold")
        for k, v in KEYS:
            grid.add_row(k, v)
        title = Text("neuron-prof keys", style="bold")
        title.append("   ↑↓ pgup pgdn scroll, esc closes", style="dim")
        with VerticalScroll(id="help"):
            yield Static(title)
            yield Static(grid)
