"""A slice's detail (Enter on the timeline): arguments, call site and linked slices, in a modal."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class SliceDetailScreen(ModalScreen[None]):
    """(label, value) lines of one slice; esc, enter or q closes it."""

    DEFAULT_CSS = """
    SliceDetailScreen { align: center middle; }
    SliceDetailScreen > VerticalScroll {
        width: 100%; max-width: 120; height: auto; max-height: 100%;
        border: round $accent; background: $panel; padding: 0 1;
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,enter", "dismiss", "Close")]

    def __init__(self, title: str, facts: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text = title
        self.facts = facts

    def compose(self) -> ComposeResult:
        # a grid: at 80 columns long values wrap beside their labels, never cut
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="dim", no_wrap=True)
        grid.add_column(overflow="fold")
        for k, v in self.facts:
            grid.add_row(Text(k), Text(v))
        head = Text(self.title_text, style="bold")
        head.append("   esc closes", style="dim")
        with VerticalScroll(id="slice-detail"):
            yield Static(head)
            yield Static(grid)

    def text(self) -> str:
        """The facts as plain lines (for tests)."""
        return "\n".join(f"{k}: {v}" for k, v in self.facts)
