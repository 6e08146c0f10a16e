"""Drawing one timeline lane as a line of Segments: named boxes, merged shades, counter area charts.

`FlamePainter.slice_line` turns a lane's `LaneCells` (tui/_flame.py) into Segments: a box per slice
wide enough for one, coloured by its name (a stable hash, so an op keeps its colour across frames and
runs) with the name written in it; runs of sub-cell slices as shades; marks for search hits, the
selected slice, the slices linked to it by flows and flow arrivals ("▶"). Work is O(width) per line.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Collection

import numpy as np
from rich.color import Color
from rich.segment import Segment
from rich.style import Style

from neuron_prof.analysis.fmt import printable
from neuron_prof.tui._flame import MERGED, NONE, LaneCells, box_name, fit_name, runs
from neuron_prof.tui._lanes import BARS, SHADES

PALETTE = (
    "#4e9ae6",
    "#e6a04e",
    "#5cc27a",
    "#d45b5b",
    "#a57fd8",
    "#47b8b8",
    "#d9cb4f",
    "#c274b0",
    "#8fa3bf",
    "#e67e4e",
    "#7fbf6a",
    "#6a7fd8",
)
KIND_COLOR = {
    "compile": "#d45b5b",
    "fallback": "#e6a04e",
    "sync": "#d9cb4f",
    "collective": "#47b8b8",
    "memory": "#a57fd8",
    "counter": "#47b8b8",
}
INK = "#101010"
SELECTED = Style(color="#000000", bgcolor="#ffffff", bold=True)
HIT = Style(color="#000000", bgcolor="#ffd75f", bold=True)
LINKED = Style(color="#000000", bgcolor="#ff87d7", bold=True)
FLOW_MARK = "▶"
MIN_NAMED = 4
"""Boxes at least this many cells wide show their slice's name."""


def _darker(hex_color: str, f: float = 0.72) -> str:
    r, g, b = Color.parse(hex_color).get_truecolor()
    return f"#{int(r * f):02x}{int(g * f):02x}{int(b * f):02x}"


class FlamePainter:
    """Colours and glyphs for lane lines; caches one Style per name and shade."""

    def __init__(self, name_of: Callable[[int], str], name_id_of: Callable[[int], int]) -> None:
        self._name_of = name_of
        """Slice row -> its name."""
        self._name_id_of = name_id_of
        self._boxes: dict[tuple[str, bool], Style] = {}
        self._inks: dict[str, Style] = {}
        self._by_name: dict[int, str] = {}

    def color(self, row: int, kind: str) -> str:
        """The colour of slice `row`: fixed for probe lanes, else by name."""
        fixed = KIND_COLOR.get(kind)
        if fixed:
            return fixed
        nid = self._name_id_of(row)
        c = self._by_name.get(nid)
        if c is None:
            c = self._by_name[nid] = PALETTE[zlib.crc32(self._name_of(row).encode()) % len(PALETTE)]
        return c

    def box_style(self, color: str, alt: bool) -> Style:
        st = self._boxes.get((color, alt))
        if st is None:
            st = self._boxes[(color, alt)] = Style(color=INK, bgcolor=_darker(color) if alt else color)
        return st

    def ink(self, color: str) -> Style:
        st = self._inks.get(color)
        if st is None:
            st = self._inks[color] = Style(color=color)
        return st

    def slice_line(
        self,
        kind: str,
        cells: LaneCells,
        *,
        hits: np.ndarray | None = None,
        selected: int = NONE,
        linked: Collection[int] = (),
        flow_cells: Collection[int] = (),
        cursor: int = -1,
    ) -> list[Segment]:
        """Segments of a slice lane (module docstring). `hits`: a bool per slice row (search matches)."""
        width = len(cells.key)
        chars = [" "] * width
        styles: list[Style | None] = [None] * width
        prev_end, alt = -1, False
        arrivals = set(flow_cells)
        st: Style | None
        for a, b, key in runs(cells):
            if key >= 0:
                alt = (not alt) if prev_end == a else False
                prev_end = b
                if key == selected:
                    st = SELECTED
                elif hits is not None and hits[key]:
                    st = HIT
                elif key in linked:
                    st = LINKED
                else:
                    st = self.box_style(self.color(key, kind), alt)
                # a name cut to a letter or two reads as noise: narrow boxes show their colour only
                mark = 1 if a in arrivals else 0  # "▶name": the arrow before the name, not over it
                n = b - a - mark
                text = fit_name(box_name(printable(self._name_of(key))), n) if n >= MIN_NAMED else " " * n
                chars[a + mark : b] = text
                styles[a:b] = [st] * (b - a)
            elif key == MERGED:
                # one style per run (the colour of its first slice; a search hit anywhere marks it all)
                prev_end = -1
                level = np.minimum(4, 1 + (cells.fill[a:b] * 4).astype(np.int64))
                chars[a:b] = [SHADES[v] for v in level.tolist()]
                reps = cells.rep[a:b]
                hit = hits is not None and bool(hits[reps[reps >= 0]].any())
                rep = int(reps[0])
                st = HIT if hit else self.ink(self.color(rep, kind)) if rep >= 0 else None
                styles[a:b] = [st] * (b - a)
        for k in flow_cells:
            if 0 <= k < width:
                chars[k] = FLOW_MARK
                if styles[k] is None:
                    styles[k] = Style(color="#ff87d7", bold=True)
        return _merge(chars, styles, cursor)

    def counter_line(self, kind: str, levels: np.ndarray, cursor: int = -1) -> list[Segment]:
        """A one-row area chart: the level of each cell as a bar " ▁▂▃▄▅▆▇█"."""
        chars = [BARS[int(round(v * 8))] for v in levels]
        st = self.ink(KIND_COLOR.get(kind, "#47b8b8"))
        return _merge(chars, [st] * len(chars), cursor)


_CURSOR = Style(reverse=True)
_BLANK_CURSOR = Style(bgcolor="grey50")


def _merge(chars: list[str], styles: list[Style | None], cursor: int) -> list[Segment]:
    """Segments for runs of one style; the cursor cell is shown reversed (grey where blank)."""
    if 0 <= cursor < len(chars):
        st = styles[cursor]
        styles[cursor] = (st + _CURSOR) if st is not None and chars[cursor] != " " else _BLANK_CURSOR
    segs: list[Segment] = []
    a = 0
    for k in range(1, len(chars) + 1):
        if k == len(chars) or styles[k] is not styles[a]:
            segs.append(Segment("".join(chars[a:k]), styles[a]))
            a = k
    return segs
