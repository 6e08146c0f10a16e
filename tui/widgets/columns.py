"""Table columns: what a column shows and how a row of them fits a width. Pure functions, no Textual.

    cols = [Column("name", "op", 0, min_width=30), Column("total_ns", "total", 10, fmt_ns, drop=1)]
    for col, width in fit_columns(cols, 80):
        text = cell(col.fmt(value), width, col.right, col.clip_left)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from neuron_prof.analysis import fit_site, short_site
from neuron_prof.analysis.fmt import cut, printable


@dataclass(frozen=True)
class Column:
    """One column: `key` into the data, a title, a width in cells (0: take the rest) and a formatter."""

    key: str
    title: str
    width: int = 12
    fmt: Callable[[Any], str] = str
    right: bool = False
    """Right-align (numbers)."""
    style: Callable[[Any], str] | None = None
    """Rich style of a cell from its value (e.g. severity colours); None: the row's style."""
    clip_left: bool = False
    """A call site or path: shortened in the middle, never losing its end ("/work/…/train.py:42")."""
    drop: int = 0
    """Narrow tables hide columns with drop > 0, highest first, until the width-0 column gets `min_width`."""
    min_width: int = 10
    """For the width-0 column: the width it gets before other columns are dropped."""
    grow: int = 0
    """Extra cells this column takes while the width-0 column keeps 1.5x its `min_width` (wide screens)."""
    bar: Callable[[Any, int], list[tuple[str, str]]] | None = None
    """A drawn cell (a stacked bar): runs of (text, rich style) from the value and the column's width, at
    most that many cells; None: the cell is `fmt`'s text."""


def cell(text: str, width: int, right: bool, clip_left: bool = False) -> str:
    """`text` on one line, escaped, fitted to `width` cells: padded, or cut with "…" (a call site, if
    `clip_left`: relative to the working directory, then shortened in its middle, keeping its ``:LINE``)."""
    text = printable(text)
    if clip_left and len(text) > width:
        text = short_site(text)  # relative to the working directory first: "train.py:42" from the project
    if len(text) > width:
        if width <= 0:
            return ""
        return fit_site(text, width) if clip_left else cut(text, width)
    return text.rjust(width) if right else text.ljust(width)


def fit_columns(columns: list[Column], width: int) -> list[tuple[Column, int]]:
    """(column, width) of the columns that fit `width` cells: columns with `drop` leave, highest first, until
    the width-0 column gets its `min_width`; then columns with `grow` widen while it keeps 1.5x that."""
    cols = list(columns)
    flex = next((c for c in cols if not c.width), None)
    need = flex.min_width if flex is not None else 0
    while True:
        rest = width - sum(c.width for c in cols if c.width) - (len(cols) - 1)
        droppable = [c for c in cols if c.drop]
        if rest >= need or not droppable:
            break
        cols.remove(max(droppable, key=lambda c: c.drop))
    widths = {}
    for c in cols:
        extra = c.grow if c.grow and rest - c.grow >= need * 3 // 2 else 0
        widths[c.key], rest = c.width + extra, rest - extra
    return [(c, widths[c.key] or max(10, rest)) for c in cols]
