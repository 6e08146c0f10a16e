"""The TUI on a job of many ranks: the job summary's ranks view first, a rank's full trace only when chosen.

    app = JobApp(js.to_dict(), source="run/")    # the job summary document (neuron_prof.job)
    chosen = app.run()                           # the trace file of the rank chosen with enter, or None (q)

The App holds the summary only (kilobytes per rank). Choosing a rank ends it with that rank's source; the
caller opens the trace in the single-trace app and comes back here afterwards (`neuron-prof tui run/`).
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Static

from neuron_prof.analysis import Kind, fit_site
from neuron_prof.job import COLUMNS, failed_lines, head_line, rank_cells
from neuron_prof.tui.screens.overview import SEVERITY_STYLE


class JobApp(App[str | None]):
    """Ranks of a job side by side, the cross-rank findings below; enter opens a rank."""

    TITLE = "neuron-prof job"
    CSS = """
    #job-head { height: auto; padding: 0 1; text-style: bold; }
    #ranks { height: 1fr; min-height: 5; }
    #job-findings { height: auto; max-height: 45%; padding: 0 1; border-top: solid $primary-darken-2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open_rank", "open rank", priority=True),
        Binding("q", "quit", "quit"),
    ]

    def __init__(self, doc: dict[str, Any], *, source: str = "", cursor_rank: int | None = None) -> None:
        super().__init__()
        self.doc = doc
        self.source = source
        self.rows = [r for r in doc["ranks"] if r.get("status") == "ok"]
        self._cursor_rank = cursor_rank

    def compose(self) -> ComposeResult:
        yield Static(self._head(self.size.width or 80), id="job-head")
        table: DataTable[str] = DataTable(id="ranks", cursor_type="row", zebra_stripes=True)
        yield table
        with VerticalScroll(id="job-findings"):
            yield Static(self._findings_text(), id="job-findings-text")
        yield Footer()

    def _head(self, width: int) -> Text:
        """The counts and keys on their own line; the job's folder below, shortened in its middle to the
        width, so no count is split from its unit and the path is never cut at its end."""
        head = Text(head_line(self.doc) + " — enter: open the rank's trace, q: quit")
        if self.source:
            head.append("\n" + fit_site(self.source, max(8, width - 2)), style="not bold")
        return head

    def on_resize(self) -> None:
        self.query_one("#job-head", Static).update(self._head(self.size.width))

    def on_mount(self) -> None:
        table = self.query_one("#ranks", DataTable)
        for col, _ in COLUMNS:
            table.add_column(col, key=col)
        flagged = {f["rank"] for f in self.doc["findings"] if f.get("rank") is not None}
        for r in self.rows:
            cells = rank_cells(r)
            style = "bold yellow" if r["rank"] in flagged else ""
            table.add_row(*(Text(c, style=style, justify="right") for c in cells), key=str(r["rank"]))
        if self._cursor_rank is not None:
            keys = [r["rank"] for r in self.rows]
            if self._cursor_rank in keys:
                table.move_cursor(row=keys.index(self._cursor_rank))
        table.focus()

    def _findings_text(self) -> Text:
        out = Text()
        for line in failed_lines(self.doc):
            out.append(line + "\n", style="red")
        findings = [f for f in self.doc["findings"] if f["kind"] != Kind.RANKS_TO_OPEN]
        if not findings:
            out.append("No cross-rank findings.\n", style="dim")
        for f in findings:
            out.append(f"{f['severity']:8} ", style=SEVERITY_STYLE.get(f["severity"], ""))
            out.append(f"{f['title']}\n")
        opener = next((f for f in self.doc["findings"] if f["kind"] == Kind.RANKS_TO_OPEN), None)
        if opener is not None:
            ranks = ", ".join(map(str, opener["evidence"]["ranks"]))
            out.append(f"Ranks worth opening: {ranks}\n", style="bold")
            out.append(opener["evidence"]["command"])
        return out

    @property
    def selected_rank(self) -> int | None:
        table = self.query_one("#ranks", DataTable)
        if not self.rows or table.cursor_row < 0:
            return None
        return int(self.rows[table.cursor_row]["rank"])

    def action_open_rank(self) -> None:
        """End with the chosen rank's trace (the caller loads it: only now, only that one)."""
        rank = self.selected_rank
        if rank is not None:
            self.exit(next(r["source"] for r in self.rows if r["rank"] == rank))
