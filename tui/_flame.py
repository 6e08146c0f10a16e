"""What one timeline lane shows in one frame, as runs of terminal cells. Pure numpy, no Textual.

A frame is the window [t0, t1) split into `width` cells. For a slice lane each cell holds none, one or
many slices (counted with two binary searches over the lane's sorted starts and ends, never a loop over
slices). Cells holding the same single slice form a *box* that is drawn with the slice's name; cells
holding several sub-cell slices form a *merged* run drawn as busy shades. The cost is
O(width x log n) per lane, whatever the number of slices in view.

    cells = slice_cells(lane, t0, t1, width)
    for start, end, row in runs(cells):   # row >= 0: a box; MERGED: several slices; NONE: idle
        ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from neuron_prof.analysis.fmt import cut
from neuron_prof.model.order import searchsorted
from neuron_prof.tui._lanes import Lane

NONE = -1
"""No slice in the cell."""
MERGED = -2
"""Several slices in the cell (each shorter than a cell)."""


@dataclass(frozen=True)
class LaneCells:
    """One lane over one window: per cell, the slice row (or NONE/MERGED), a representative row for the
    colour of merged cells, and the busy fraction."""

    key: np.ndarray
    rep: np.ndarray
    fill: np.ndarray


def _edges(t0: float, t1: float, width: int) -> np.ndarray:
    """Cell edges in whole ns, int64 like the lanes' arrays: searchsorted of float edges into int64
    starts would convert the whole lane to float64 on every call (~1 ms per 100k slices)."""
    return np.floor(np.linspace(t0, t1, width + 1)).astype(np.int64)


def slice_cells(lane: Lane, t0: float, t1: float, width: int) -> LaneCells:
    """The cells of a slice lane over [t0, t1) (module docstring)."""
    edges = _edges(t0, t1, width)
    n = len(lane.starts)
    if not n:
        empty = np.full(width, NONE, dtype=np.int64)
        return LaneCells(empty, empty, np.zeros(width))
    # slices that started before a cell's right edge, minus those that ended at or before its left edge
    started = searchsorted(lane.starts, edges[1:], side="left")
    ended = searchsorted(lane.ends_sorted, edges[:-1], side="right")
    count = started - ended
    last = np.maximum(started - 1, 0)
    rep = np.where(started > 0, lane.rows[last], NONE)
    key = np.where(count == 1, rep, np.where(count > 1, MERGED, NONE))
    busy = lane.busy_until(edges)
    fill = np.clip((busy[1:] - busy[:-1]) / np.maximum(edges[1:] - edges[:-1], 1), 0.0, 1.0)
    return LaneCells(key.astype(np.int64), rep.astype(np.int64), fill)


def runs(cells: LaneCells) -> list[tuple[int, int, int]]:
    """(start cell, end cell, key) for each run of equal keys, left to right. At most `width` runs."""
    key = cells.key
    if not len(key):
        return []
    cut = np.flatnonzero(key[1:] != key[:-1]) + 1
    bounds = np.concatenate(([0], cut, [len(key)]))
    return [(int(a), int(b), int(key[a])) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def counter_levels(lane: Lane, t0: float, t1: float, width: int) -> np.ndarray:
    """Per cell, the counter's highest value in the cell (the value held from before counts) over the
    lane's highest value: 0-1. Peaks shorter than a cell still show."""
    assert lane.values is not None
    v = lane.values
    if not len(v):
        return np.zeros(width)
    edges = _edges(t0, t1, width)
    held_i = searchsorted(lane.starts, edges[:-1], side="right") - 1
    level = np.where(held_i >= 0, v[np.maximum(held_i, 0)], 0.0).astype(np.float64)
    a = searchsorted(lane.starts, edges[:-1], side="left")
    b = searchsorted(lane.starts, edges[1:], side="left")
    has = b > a
    if has.any():
        # segment k of reduceat is [a[k], a[k+1]) = the cell's samples; b[-1] closes the last cell
        ext = np.append(v, 0.0)
        peaks = np.maximum.reduceat(ext, np.append(a, b[-1]))[:width]
        level = np.where(has, np.maximum(level, peaks), level)
    vmax = float(v.max())
    return np.clip(level / vmax, 0.0, 1.0) if vmax > 0 else np.zeros(width)


_PY_FRAME = re.compile(r"^(?:.*/)?([^/]+)\((\d+)\): (.+)$")


def box_name(name: str) -> str:
    """The text a box starts with: a Python frame "/long/path/train.py(147): run" reads "run train.py:147"
    (the function first: it is what a narrow box can show); other names as they are."""
    m = _PY_FRAME.match(name)
    return f"{m.group(3)} {m.group(1)}:{m.group(2)}" if m else name


def fit_name(name: str, width: int) -> str:
    """A box's text: the name cut to `width` cells with "…", padded with spaces."""
    return cut(name, width).ljust(width)
