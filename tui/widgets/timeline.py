"""Timeline: lanes of slices binned per terminal cell, with a time cursor, zoom and pan keys.

Each cell shows how busy its lane was in that cell's time span (" ░▒▓█") coloured by the slice under
its midpoint. The binning of a frame is cached per (t0, t1, width), so cursor moves redraw nothing but
the cursor column's lines.
"""

from __future__ import annotations

import zlib
from typing import ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from neuron_prof.model import StringTable
from neuron_prof.tui._fmt import printable
from neuron_prof.tui._lanes import BARS, SHADES, Lane

LABEL_W = 22
"""The narrowest label column; it widens to the longest lane label, up to a third of the width."""


def fit_label(label: str, width: int) -> str:
    """A lane label in `width` cells: the device prefix ("MTIA 17 · ") goes first, then the end is cut,
    so "Stream 107" and "Stream 107 Submission Queue" stay apart at 80 columns."""
    if len(label) > width and " · " in label:
        label = label.split(" · ", 1)[1]
    return (label[: width - 1] + "…") if len(label) > width else label.ljust(width)
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
    "counter": "#a57fd8",
}


class Timeline(ScrollView, can_focus=True):
    """Lanes over a time window [t0, t1) with a cursor time. Lanes scroll vertically.

    `t0`, `t1`, `cursor_ns` and `span` are ns since `origin` (the lanes' clock); `jump` and `cursor_abs`
    speak Unix ns.
    """

    DEFAULT_CSS = """
    Timeline { height: 1fr; overflow-x: hidden; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left,h", "move(-1)", "Cursor", key_display="←→"),
        Binding("right,l", "move(1)", "Cursor", show=False),
        Binding("shift+left,H", "pan(-0.25)", "Pan", key_display="⇧←→"),
        Binding("shift+right,L", "pan(0.25)", "Pan", show=False),
        Binding("plus,equals_sign", "zoom(0.5)", "Zoom in"),
        Binding("minus,underscore", "zoom(2)", "Zoom out"),
        Binding("0", "reset", "Whole trace"),
        Binding("up,k", "lane(-1)", "Lane", key_display="↑↓"),
        Binding("down,j", "lane(1)", "Lane ↓", show=False),
        Binding("n", "next_slice(1)", "Next slice", show=False),
        Binding("N", "next_slice(-1)", "Prev slice", show=False),
    ]

    class CursorMoved(Message):
        """The cursor time or the selected lane changed."""

        def __init__(self, timeline: Timeline) -> None:
            super().__init__()
            self.timeline = timeline

    def __init__(
        self,
        lanes: list[Lane],
        name_ids: np.ndarray,
        strings: StringTable,
        span: tuple[int, int],
        *,
        origin: int = 0,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.origin = origin
        self.lanes = list(lanes)
        self.name_ids = name_ids
        """Name string id per slice row (trace.slices.name)."""
        self.strings = strings
        self._colors: dict[int, Style] = {}
        self.span = (span[0] - origin, max(span[1], span[0] + 1) - origin)
        self.t0, self.t1 = float(self.span[0]), float(self.span[1])
        self.cursor_ns = float(self.span[0])
        self.lane = 0
        self._cache: dict[int, tuple[str, list[Style]]] = {}
        self._cache_key: tuple[float, float, int] | None = None
        self._longest = max((len(printable(lane.label)) for lane in lanes), default=0)

    # ---- geometry ------------------------------------------------------------------------------
    @property
    def label_width(self) -> int:
        """Cells of the label column: the longest label, at least LABEL_W and at most a third of the width."""
        return max(LABEL_W, min(self._longest, (self.size.width or 80) // 3))

    @property
    def cells(self) -> int:
        return max(1, self.size.width - self.label_width - 1)

    def cell_of(self, t: float) -> int:
        return int((t - self.t0) / (self.t1 - self.t0) * self.cells)

    def time_of(self, cell: int) -> float:
        return self.t0 + (cell + 0.5) * (self.t1 - self.t0) / self.cells

    def on_resize(self) -> None:
        self.virtual_size = Size(self.size.width, len(self.lanes))
        self.refresh()
        self._changed()

    # ---- state changes ------------------------------------------------------------------------
    def set_window(self, t0: float, t1: float) -> None:
        """Show [t0, t1), clamped to at least 1 µs wide and to the trace (with a little margin)."""
        width = max(t1 - t0, 1000.0)
        lo, hi = (
            self.span[0] - (self.span[1] - self.span[0]) * 0.05,
            self.span[1] + (self.span[1] - self.span[0]) * 0.05,
        )
        width = min(width, hi - lo)
        t0 = min(max(t0, lo), hi - width)
        self.t0, self.t1 = t0, t0 + width
        self.cursor_ns = min(max(self.cursor_ns, self.t0), self.t1)
        self.refresh()
        self._changed()

    @property
    def cursor_abs(self) -> int:
        """The cursor time in Unix ns."""
        return self.origin + int(round(self.cursor_ns))

    def jump(self, t_abs: int, track: int | None = None, window_ns: float | None = None) -> None:
        """Centre the view on Unix time `t_abs` with the cursor there; select `track`'s lane when given."""
        t_ns = float(t_abs - self.origin)
        if track is not None:
            for i, lane in enumerate(self.lanes):
                if lane.track == track:
                    self.lane = i
                    # the deepest lane of the track holding a slice at t: the most specific name
                    for k in range(i, len(self.lanes)):
                        if self.lanes[k].track != track:
                            break
                        if self.lanes[k].at(t_ns) >= 0:
                            self.lane = k
                    break
            self._scroll_to_lane()
        w = window_ns if window_ns is not None else min(self.t1 - self.t0, (self.span[1] - self.span[0]) / 8)
        self.cursor_ns = float(t_ns)
        self.set_window(t_ns - w / 2, t_ns + w / 2)
        self.cursor_ns = float(t_ns)
        self._changed()

    def insert_lane(self, index: int, lane: Lane) -> None:
        """Show `lane` at position `index` (a deeper lane a jump needs)."""
        self.lanes.insert(index, lane)
        self._longest = max(self._longest, len(printable(lane.label)))
        self._cache.clear()
        self._cache_key = None
        self.virtual_size = Size(self.size.width, len(self.lanes))
        self.refresh()

    def _changed(self) -> None:
        self.post_message(self.CursorMoved(self))

    def _scroll_to_lane(self) -> None:
        top, h = self.scroll_offset.y, max(1, self.size.height)
        if self.lane < top:
            self.scroll_to(y=self.lane, animate=False, immediate=True)
        elif self.lane >= top + h:
            self.scroll_to(y=self.lane - h + 1, animate=False, immediate=True)

    # ---- actions -------------------------------------------------------------------------------
    def action_move(self, cells: int) -> None:
        step = (self.t1 - self.t0) / self.cells
        t = self.cursor_ns + cells * step
        if t < self.t0 or t > self.t1:
            self.set_window(self.t0 + cells * step, self.t1 + cells * step)
        self.cursor_ns = min(max(t, self.t0), self.t1)
        self.refresh()
        self._changed()

    def action_pan(self, fraction: float) -> None:
        d = (self.t1 - self.t0) * fraction
        self.cursor_ns += d
        self.set_window(self.t0 + d, self.t1 + d)

    def action_zoom(self, factor: float) -> None:
        """Zoom around the cursor: factor < 1 zooms in."""
        c = self.cursor_ns
        self.set_window(c - (c - self.t0) * factor, c + (self.t1 - c) * factor)

    def action_reset(self) -> None:
        self.set_window(*self.span)

    def action_lane(self, delta: int) -> None:
        self.lane = max(0, min(self.lane + delta, len(self.lanes) - 1))
        self._scroll_to_lane()
        self.refresh()
        self._changed()

    def action_next_slice(self, direction: int) -> None:
        """Move the cursor to the start of the next (or previous) slice on the selected lane."""
        if not self.lanes:
            return
        lane = self.lanes[self.lane]
        if direction > 0:
            i = int(np.searchsorted(lane.starts, self.cursor_ns, side="right"))
        else:
            i = int(np.searchsorted(lane.starts, self.cursor_ns, side="left")) - 1
        if 0 <= i < len(lane.starts):
            t = float(lane.starts[i])
            if not self.t0 <= t <= self.t1:
                w = self.t1 - self.t0
                self.set_window(t - w / 2, t + w / 2)
            self.cursor_ns = t
            self.refresh()
            self._changed()

    # ---- what is under the cursor --------------------------------------------------------------
    def under_cursor(self) -> tuple[Lane | None, int]:
        """(selected lane, slice row at the cursor time or -1)."""
        if not self.lanes:
            return None, -1
        lane = self.lanes[self.lane]
        return lane, lane.at(self.cursor_ns)

    # ---- rendering ------------------------------------------------------------------------------
    def _binned(self, i: int) -> tuple[str, list[Style]]:
        key = (self.t0, self.t1, self.cells)
        if key != self._cache_key:
            self._cache.clear()
            self._cache_key = key
        hit = self._cache.get(i)
        if hit is not None:
            return hit
        lane = self.lanes[i]
        fill, rows = lane.bin(self.t0, self.t1, self.cells)
        if lane.is_counter:
            chars = "".join(BARS[int(round(f * 8))] for f in fill)
            color = KIND_COLOR.get(lane.kind, "#a57fd8")
            styles = [Style(color=color)] * len(chars)
        else:
            level = np.where(fill <= 0, 0, np.minimum(4, 1 + (fill * 4).astype(int)))
            chars = "".join(SHADES[v] for v in level)
            fixed = KIND_COLOR.get(lane.kind)
            plain = Style()
            if fixed:
                styles = [Style(color=fixed) if r >= 0 else plain for r in rows]
            else:
                styles = [self._color(int(self.name_ids[r])) if r >= 0 else plain for r in rows]
        self._cache[i] = (chars, styles)
        return chars, styles

    def _color(self, name_id: int) -> Style:
        # colour by name (a stable hash, not hash(): that changes per process) so an op keeps its colour
        st = self._colors.get(name_id)
        if st is None:
            st = self._colors[name_id] = Style(
                color=PALETTE[zlib.crc32(self.strings[name_id].encode()) % len(PALETTE)]
            )
        return st

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        i = self.scroll_offset.y + y
        base = self.rich_style
        if i >= len(self.lanes):
            return Strip.blank(width, base)
        lane = self.lanes[i]
        selected = i == self.lane
        label = fit_label(printable(lane.label), self.label_width)
        segs = [
            Segment(label, base + Style(bold=selected, reverse=selected and self.has_focus)),
            Segment("│", base),
        ]
        chars, styles = self._binned(i)
        cur = self.cell_of(self.cursor_ns)
        # merge runs of one style into one Segment
        run_start = 0
        for k in range(1, len(chars) + 1):
            if k == len(chars) or styles[k] != styles[run_start] or k == cur or k - 1 == cur:
                st = base + styles[run_start]
                if run_start == cur:
                    st = st + Style(bgcolor="grey50")
                segs.append(Segment(chars[run_start:k], st))
                run_start = k
        return Strip(segs).crop_extend(0, width, base)

    def on_click(self, event: Click) -> None:
        """A click picks the lane under it and puts the cursor at the clicked time."""
        lane = self.scroll_offset.y + event.y
        if 0 <= lane < len(self.lanes):
            self.lane = lane
        cell = event.x - self.label_width - 1
        if 0 <= cell < self.cells:
            self.cursor_ns = self.time_of(cell)
        self.refresh()
        self._changed()

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
