"""VirtualTable: a table over numpy columns that renders only the visible lines.

`DataTable` measures every row before the first paint (19 s + 88 s at 1M rows, textual-facts.md);
this widget keeps the columns as arrays plus an `order` index (sort and filter) and builds the
Segments of a line in `render_line`, so first paint and each key cost the same at 100 or 10M rows.

Cells are Segments of plain text: a trace string is never parsed as markup here.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual import work
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from neuron_prof.analysis.fmt import printable
from neuron_prof.tui.widgets.columns import Column, cell, fit_columns

__all__ = ["BACKGROUND_ROWS", "Column", "VirtualTable"]

BACKGROUND_ROWS = 200_000
"""From this many rows, indexing for the first filter runs in a thread."""


class VirtualTable(ScrollView, can_focus=True):
    """A scrollable table of any number of rows; line 0 is the header."""

    DEFAULT_CSS = """
    VirtualTable { height: 1fr; background: $surface; overflow-x: hidden; }
    VirtualTable:focus { background-tint: $foreground 4%; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "cursor_to(0)", "Top", show=False),
        Binding("end", "cursor_to(-1)", "Bottom", show=False),
        Binding("enter", "select", "Drill in"),
        Binding("s", "cycle_sort", "Sort"),
    ]

    class RowHighlighted(Message):
        """The cursor moved to data row `row` (an index into the columns, -1 when empty)."""

        def __init__(self, table: VirtualTable, row: int) -> None:
            super().__init__()
            self.table = table
            self.row = row

        @property
        def control(self) -> VirtualTable:
            return self.table

    class RowSelected(RowHighlighted):
        """Enter was pressed on data row `row`."""

    def __init__(
        self,
        columns: list[Column],
        data: dict[str, np.ndarray] | None = None,
        *,
        filter_key: str | None = None,
        queries: Callable[[str], Sequence[str]] | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.columns = columns
        self.filter_key = filter_key or columns[0].key
        self.queries = queries or (lambda q: (q,))
        """The texts a filter query stands for (a row matches when its filter text contains one)."""
        self.data: dict[str, np.ndarray] = {}
        self.order: np.ndarray = np.zeros(0, dtype=np.int64)
        """Data rows in display order (after sort and filter)."""
        self.cursor = 0
        """Position in `order` of the highlighted row."""
        self.sort_key: str | None = None
        self.filter_text = ""
        self._uniq: tuple[np.ndarray, np.ndarray] | None = None
        self.empty_text = ""
        """What the table says in place of rows when it has none (what is absent, and why)."""
        self.pan = 0
        """Characters cut from the start of the width-0 column's text (← → pan long names; numbers stay)."""
        self.set_data(data if data is not None else {c.key: np.zeros(0) for c in columns})

    # ---- data ---------------------------------------------------------------------------------
    @property
    def n_rows(self) -> int:
        return len(next(iter(self.data.values()))) if self.data else 0

    def set_data(self, data: dict[str, np.ndarray]) -> None:
        """Replace the rows (kept in the given order until sorted)."""
        self.data = data
        self._uniq = None
        self.order = np.arange(self.n_rows, dtype=np.int64)
        self.cursor = 0
        if self.filter_text:
            self.filter(self.filter_text)
        self._resize()

    def sort_by(self, key: str, descending: bool = True) -> None:
        """Order the visible rows by column `key` (stable)."""
        col = self.data[key][self.order]
        if col.dtype == object:
            o = np.argsort(np.array([str(v).lower() for v in col]), kind="stable")
        else:
            o = np.argsort(-col if descending else col, kind="stable")
        self.order = self.order[o]
        self.sort_key = key
        self.move_to(0)
        self.refresh()

    def filter(self, text: str) -> None:
        """Show only rows whose filter column contains `text` (case-insensitive); "" shows all.

        The first filter of a big table indexes the column's distinct values in a thread (0.8 s at
        1M rows on a busy machine); the rows appear when it is done and the UI keeps answering.
        """
        self.filter_text = text
        if text and self._uniq is None:
            if self.n_rows >= BACKGROUND_ROWS and self.is_mounted:
                self._index_in_background()
                return
            self._uniq = self._index()
        self._apply_filter()

    def _index(self) -> tuple[np.ndarray, np.ndarray]:
        """(lower-case text of each distinct value of the filter column, row -> distinct index)."""
        col = self.data[self.filter_key]
        # astype(str) and np.unique run in C; a Python str() per row cost seconds at 1M rows
        uniq, inv = np.unique(col.astype(str) if col.dtype == object else col, return_inverse=True)
        fmt = next((c.fmt for c in self.columns if c.key == self.filter_key), str)
        # the text a row shows (e.g. a track name for a track id) is what the filter matches
        return np.array([printable(fmt(u)).lower() for u in uniq], dtype=object), inv

    @work(thread=True, exclusive=True, group="index", exit_on_error=False)
    def _index_in_background(self) -> None:
        data = self.data
        index = self._index()
        self.app.call_from_thread(self._indexed, data, index)

    def _indexed(self, data: dict[str, np.ndarray], index: tuple[np.ndarray, np.ndarray]) -> None:
        if data is self.data:  # not replaced meanwhile
            self._uniq = index
            self._apply_filter()

    def _apply_filter(self) -> None:
        text, n = self.filter_text, self.n_rows
        if not text:
            order = np.arange(n, dtype=np.int64)
        else:
            assert self._uniq is not None
            texts, inv = self._uniq
            qs = [q.lower() for q in self.queries(text) if q]
            hit = np.fromiter((any(q in t for q in qs) for t in texts), dtype=bool, count=len(texts))
            order = np.flatnonzero(hit[inv]).astype(np.int64)
        self.order = self._arrange(order)
        self.cursor = 0
        self._resize()
        self._post_highlight()

    def _arrange(self, rows: np.ndarray) -> np.ndarray:
        """The display order of the rows that pass the filter: by the sort column when it is numeric."""
        if self.sort_key is not None and len(rows):
            col = self.data[self.sort_key][rows]
            if col.dtype != object:
                rows = rows[np.argsort(-col, kind="stable")]
        return rows

    @property
    def row(self) -> int:
        """The highlighted data row, or -1 when the table is empty."""
        return int(self.order[self.cursor]) if len(self.order) else -1

    def value(self, key: str, row: int | None = None) -> Any:
        """The value of column `key` at data row `row` (default: the highlighted row)."""
        r = self.row if row is None else row
        return self.data[key][r] if r >= 0 else None

    def visible_text(self, key: str) -> list[str]:
        """The formatted cells of column `key` in display order (tests and summaries)."""
        col = next(c for c in self.columns if c.key == key)
        return [printable(self.cell_text(col, int(r))) for r in self.order]

    def cell_text(self, col: Column, row: int) -> str:
        """The text of column `col` at data row `row`, before it is fitted to the column's width."""
        text = col.fmt(self.data[col.key][row])
        return text[self.pan :] if self.pan and not col.width else text

    def action_pan(self, cells: int) -> None:
        """Pan the width-0 column's text (long op and kernel names) by `cells`; the other columns stay."""
        self.pan = max(0, self.pan + cells)
        self.refresh()

    # ---- layout and rendering -----------------------------------------------------------------------
    def _resize(self) -> None:
        # columns shrink to the width, so only vertical scrolling exists
        self.virtual_size = Size(self.size.width, len(self.order) + 1)
        self.refresh()

    def shown_columns(self) -> list[tuple[Column, int]]:
        """(column, width) of the columns that fit the table's width (see `Column.drop` and `grow`)."""
        return fit_columns(self.columns, self.scrollable_content_region.width)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        shown = self.shown_columns()
        if y == 0:
            cells = []
            for c, w in shown:
                title = c.title + ("▼" if c.key == self.sort_key else "")
                if not c.width and self.pan:
                    title += f" (from character {self.pan + 1})"
                cells.append(cell(title, w, c.right))
            text = " ".join(cells)
            style = base + Style(bold=True, underline=True)
            return Strip([Segment(text, style)]).crop_extend(0, width, base)
        pos = self.scroll_offset.y + y - 1
        if not len(self.order):
            return self._empty_line(y - 1, width, base)
        if pos >= len(self.order):
            return Strip.blank(width, base)
        r = int(self.order[pos])
        style = base
        if pos == self.cursor:
            style = base + (Style(reverse=True) if self.has_focus else Style(bgcolor="grey30"))
        segs: list[Segment] = []
        plain: list[str] = []
        for c, w in shown:
            v = self.data[c.key][r]
            if c.bar is not None:  # flush the plain run, then the bar's runs, padded to the column's width
                segs.append(Segment(" ".join(plain) + (" " if plain else ""), style))
                runs = [(printable(text), s) for text, s in c.bar(v, w)]
                segs += [Segment(text, style + Style.parse(s)) for text, s in runs]
                segs.append(Segment(" " * max(0, w - sum(len(text) for text, _ in runs)), style))
                plain = [""]
                continue
            plain.append(cell(self.cell_text(c, r), w, c.right, c.clip_left))
            if c.style is not None:
                # flush the plain run, then this cell in its own style (still a plain-text Segment)
                segs.append(Segment(" ".join(plain[:-1]) + (" " if len(plain) > 1 else ""), style))
                segs.append(Segment(plain[-1], style + Style.parse(c.style(v))))
                plain = [""]
        segs.append(Segment(" ".join(plain), style))
        return Strip(segs).crop_extend(0, width, style)

    def _empty_line(self, i: int, width: int, base: Style) -> Strip:
        """Line `i` of the message shown instead of rows: why the table is empty, or that the filter hides all."""
        if self.n_rows and self.filter_text:
            text = f"no row matches the filter {self.filter_text!r} (esc clears it)"
        else:
            text = self.empty_text
        lines = textwrap.wrap(printable(text, newlines=True), max(10, width - 2)) if text else []
        if i >= len(lines):
            return Strip.blank(width, base)
        return Strip([Segment(" " + lines[i], base + Style(dim=True, italic=True))]).crop_extend(0, width, base)

    def on_resize(self) -> None:
        self._resize()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    # ---- cursor -------------------------------------------------------------------------------------
    def move_to(self, pos: int) -> None:
        """Put the cursor on display position `pos` (clamped) and keep it in view."""
        n = len(self.order)
        old = self.cursor
        self.cursor = max(0, min(pos, n - 1)) if n else 0
        page = max(1, self.size.height - 1)
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
            self.refresh()
        elif self.cursor >= top + page:
            self.scroll_to(y=self.cursor - page + 1, animate=False, immediate=True)
            self.refresh()
        else:
            # only the two changed lines repaint: the rest of the screen is untouched
            self.refresh_line(old + 1)
            self.refresh_line(self.cursor + 1)
        if old != self.cursor or n:
            self._post_highlight()

    def _post_highlight(self) -> None:
        self.post_message(self.RowHighlighted(self, self.row))

    def action_cursor(self, delta: int) -> None:
        self.move_to(self.cursor + delta)

    def action_page(self, direction: int) -> None:
        self.move_to(self.cursor + direction * max(1, self.size.height - 2))

    def action_cursor_to(self, pos: int) -> None:
        self.move_to(pos if pos >= 0 else len(self.order) - 1)

    def action_select(self) -> None:
        if len(self.order):
            self.post_message(self.RowSelected(self, self.row))

    def action_cycle_sort(self) -> None:
        """Sort by the next numeric column (descending)."""
        keys = [c.key for c in self.columns if self.data[c.key].dtype != object]
        if not keys:
            return
        i = keys.index(self.sort_key) + 1 if self.sort_key in keys else 0
        self.sort_by(keys[i % len(keys)])

    def on_click(self, event: Any) -> None:
        y = event.y
        if y >= 1:
            self.move_to(self.scroll_offset.y + y - 1)
