"""Passes over a big trace's rows a window at a time: no temporary over every row, no column held resident.

A trace opened from the column cache may be bigger than memory. A pass that reads a column over every row at
once makes temporaries of that size (tens of bytes per row, several of them alive) and brings the whole column's
pages into the process. `row_windows` cuts the rows into windows of `ROW_WINDOW` and hands the mapped pages read
in each back to the kernel (`Trace.drop_pages`) before the next: what a pass keeps across windows is its own
result and whatever state it carries (a running maximum, a stack of open slices).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol


class HasPages(Protocol):
    """What a window hands its pages back through: a `Trace` (its own scans use these windows too)."""

    def drop_pages(self) -> None: ...

ROW_WINDOW = 1 << 20
"""Rows a windowed pass reads at a time."""


def row_windows(trace: HasPages, n: int) -> Iterator[tuple[int, int]]:
    """[a, z) windows of range(n), `ROW_WINDOW` rows each (the last one shorter); after each window the pages of
    the trace's mapped columns go back to the kernel (nothing for columns in memory)."""
    size = ROW_WINDOW  # read at each call: a test cuts a small trace into many windows
    for a in range(0, n, size):
        yield a, min(a + size, n)
        trace.drop_pages()
