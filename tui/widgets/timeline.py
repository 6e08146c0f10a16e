"""Timeline: a flame chart of the trace's lanes over a time window, with a cursor, zoom, pan and search.

Slice lanes (host threads per stack depth, device queues and engines, probes) scroll vertically; the
counter lanes (memory, HBM, bandwidth) stay pinned under them as one-row area charts. Each frame draws
only what is visible: per lane, two binary searches per cell over the lane's sorted arrays
(tui/_flame.py) and one Segment per run (widgets/flame_line.py); lines are cached per window.

`t0`, `t1`, `cursor_ns` and `span` are ns since `origin` (the lanes' clock); `jump` and `cursor_abs`
speak Unix ns.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding, BindingType
from textual.events import Click, MouseScrollDown, MouseScrollUp
from textual.message import Message
from textual.strip import Strip

from neuron_prof.analysis.fmt import printable
from neuron_prof.model import StringTable
from neuron_prof.model.order import searchsorted, sorted_unique
from neuron_prof.tui._flame import LaneCells, counter_levels, slice_cells
from neuron_prof.tui._lanes import Lane
from neuron_prof.tui.widgets.flame_line import FlamePainter
from neuron_prof.tui.widgets.lane_rows import LABEL_W, PINNED, LaneRows, fit_label

__all__ = ["LABEL_W", "PINNED", "Timeline", "fit_label"]

class Timeline(LaneRows, can_focus=True):
    """Lanes over a time window [t0, t1) with a cursor time (module docstring)."""

    DEFAULT_CSS = """
    Timeline { height: 1fr; overflow-x: hidden; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left,h", "move(-1)", "Cursor", key_display="←→", show=False),
        Binding("right,l", "move(1)", "Cursor", show=False),
        Binding("shift+left,H", "pan(-0.25)", "Pan", key_display="⇧←→"),
        Binding("shift+right,L", "pan(0.25)", "Pan", show=False),
        Binding("plus,equals_sign", "zoom(0.5)", "Zoom", key_display="+-"),
        Binding("minus,underscore", "zoom(2)", "Zoom out", show=False),
        Binding("0", "reset", "Steps"),
        Binding("up,k", "lane(-1)", "Lane", key_display="↑↓"),
        Binding("down,j", "lane(1)", "Lane ↓", show=False),
        Binding("n", "next(1)", "Next", show=False),
        Binding("N", "next(-1)", "Prev", show=False),
        Binding("right_square_bracket", "next_slice(1)", "Next slice", show=False),
        Binding("left_square_bracket", "next_slice(-1)", "Prev slice", show=False),
        Binding("f", "follow", "Flow"),
    ]

    class CursorMoved(Message):
        """The cursor time or the selected lane changed."""

        def __init__(self, timeline: Timeline) -> None:
            super().__init__()
            self.timeline = timeline

    class StepMatch(Message):
        """`n`/`N` while a search is active: show the next (1) or previous (-1) match."""

        def __init__(self, timeline: Timeline, direction: int) -> None:
            super().__init__()
            self.timeline = timeline
            self.direction = direction

    class FollowFlow(Message):
        """`f` on a slice: show the slice a flow links it to (the screen picks its lane)."""

        def __init__(self, timeline: Timeline, row: int) -> None:
            super().__init__()
            self.timeline = timeline
            self.row = row

    def __init__(
        self,
        lanes: list[Lane],
        name_ids: np.ndarray,
        strings: StringTable,
        span: tuple[int, int],
        *,
        origin: int = 0,
        view: tuple[int, int] | None = None,
        flows: tuple[np.ndarray, np.ndarray] | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(lanes, id=id)
        self.origin = origin
        self.name_ids = name_ids
        """Name string id per slice row (trace.slices.name)."""
        self.strings = strings
        self.span = (span[0] - origin, max(span[1], span[0] + 1) - origin)
        v = view if view is not None else span
        self.home = (v[0] - origin, max(v[1], v[0] + 1) - origin)
        """The first window: the profiled steps (`0` comes back to it)."""
        self.t0, self.t1 = float(self.home[0]), float(self.home[1])
        self.cursor_ns = float(self.home[0])
        src, dst = flows if flows is not None else (np.zeros(0, np.int64), np.zeros(0, np.int64))
        self.flow_src, self.flow_dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        self._dst_sorted: np.ndarray | None = None
        """The flows' destinations, sorted: for a lane whose `flow_starts` were not worked out (`_flow_cells`)."""
        self.hits: np.ndarray | None = None
        """Search matches: a bool per slice row, or None when no search is active."""
        self.painter = FlamePainter(lambda r: strings[int(name_ids[r])], lambda r: int(name_ids[r]))
        self._cache: dict[int, Strip] = {}
        self._cells_cache: dict[int, LaneCells | np.ndarray] = {}
        self._cells_key: tuple[float, float, int] | None = None
        self._frame: tuple[int, int, int, Style] = (LABEL_W, 0, 80, Style())
        self._cache_key: tuple[object, ...] | None = None
        self._flow_starts: dict[int, np.ndarray] = {}
        self._selected_row = -1
        self._linked: set[int] = set()

    # ---- geometry ------------------------------------------------------------------------------
    @property
    def cells(self) -> int:
        return max(1, self.content_width - self.label_width - 1)

    def cell_of(self, t: float) -> int:
        return int((t - self.t0) / (self.t1 - self.t0) * self.cells)

    def time_of(self, cell: float) -> float:
        return self.t0 + (cell + 0.5) * (self.t1 - self.t0) / self.cells

    def on_resize(self) -> None:
        self._sync_size()
        self._changed()

    # ---- state changes ------------------------------------------------------------------------
    def set_window(self, t0: float, t1: float) -> None:
        """Show [t0, t1), clamped to at least 1 µs wide and to the profiled region (with a little margin)."""
        width = max(t1 - t0, 1000.0)
        pad = (self.span[1] - self.span[0]) * 0.02
        lo, hi = self.span[0] - pad, self.span[1] + pad
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
        self.cursor_ns = t_ns
        self.set_window(t_ns - w / 2, t_ns + w / 2)
        self.cursor_ns = t_ns
        self._changed()

    def show_slice(self, lane_index: int, row: int, start: float, end: float) -> None:
        """Select slice `row` on lane `lane_index` (times since origin): cursor on it, in view, wide
        enough to read its name when it is short."""
        self.lane = lane_index
        self._scroll_to_lane()
        w = self.t1 - self.t0
        dur = max(end - start, 1.0)
        if dur * 12 < w * 0.05 or dur > w:  # under a few cells, or wider than the window: fit it
            w = max(dur * 3, 1000.0)
        self.cursor_ns = start + dur / 2
        if not (self.t0 <= start and end <= self.t1) or w != self.t1 - self.t0:
            self.set_window(self.cursor_ns - w / 2, self.cursor_ns + w / 2)
        self.cursor_ns = start + dur / 2
        self.refresh()
        self._changed()

    def rows_changed(self) -> None:
        self._cache.clear()
        self._cache_key = None
        self._cells_cache.clear()
        self._cells_key = None
        self._flow_starts.clear()

    def set_hits(self, hits: np.ndarray | None) -> None:
        """Mark search matches (a bool per slice row) or clear them (None)."""
        self.hits = hits
        self._cache_key = None
        self.refresh()

    def _changed(self) -> None:
        self.post_message(self.CursorMoved(self))

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

    def action_zoom(self, factor: float, at: float | None = None) -> None:
        """Zoom around `at` (default: the cursor): factor < 1 zooms in."""
        c = self.cursor_ns if at is None else at
        self.set_window(c - (c - self.t0) * factor, c + (self.t1 - c) * factor)

    def action_reset(self) -> None:
        self.set_window(*self.home)

    def action_lane(self, delta: int) -> None:
        self.lane = max(0, min(self.lane + delta, len(self.lanes) - 1))
        self._scroll_to_lane()
        self.refresh()
        self._changed()

    def action_next_slice(self, direction: int) -> None:
        """Select the next (or previous) slice on the selected lane."""
        if not self.lanes or self.lanes[self.lane].is_counter:
            return
        lane = self.lanes[self.lane]
        t = int(np.floor(self.cursor_ns))
        if direction > 0:
            i = int(searchsorted(lane.starts, t, side="right"))
        else:
            i = int(searchsorted(lane.starts, t, side="left")) - 1
            if i >= 0 and lane.at(self.cursor_ns) == int(lane.rows[i]):  # inside slice i: go before it
                i -= 1
        if 0 <= i < len(lane.starts):
            self.show_slice(self.lane, int(lane.rows[i]), float(lane.starts[i]), float(lane.ends[i]))

    def action_next(self, direction: int) -> None:
        """The next search match when a search is active, else the next slice on the lane."""
        if self.hits is not None:
            self.post_message(self.StepMatch(self, direction))
        else:
            self.action_next_slice(direction)

    def action_follow(self) -> None:
        """Ask the screen to show the slice linked to the selected one by a flow."""
        _, row = self.selected()
        if row >= 0:
            self.post_message(self.FollowFlow(self, row))

    def linked(self, row: int) -> list[int]:
        """Slices linked to slice `row` by flows (the device executions a host op launched, or the host op
        that launched a device execution), in flow order."""
        out = self.flow_dst[self.flow_src == row].tolist() + self.flow_src[self.flow_dst == row].tolist()
        return [int(r) for r in out]

    # ---- what is under the cursor --------------------------------------------------------------
    def under_cursor(self) -> tuple[Lane | None, int]:
        """(selected lane, slice row at the cursor time or -1)."""
        if not self.lanes:
            return None, -1
        lane = self.lanes[self.lane]
        return lane, lane.at(self.cursor_ns)

    def selected(self) -> tuple[Lane | None, int]:
        """(selected lane, the slice at the cursor, else the first slice in the cursor's cell, else -1)."""
        lane, row = self.under_cursor()
        if lane is None or row >= 0 or lane.is_counter:
            return lane, row
        step = (self.t1 - self.t0) / self.cells
        a = self.t0 + self.cell_of(self.cursor_ns) * step
        i = int(searchsorted(lane.ends_sorted, int(np.floor(a)), side="right"))
        if i < len(lane.starts) and lane.starts[i] < a + step:
            return lane, int(lane.rows[i])
        return lane, -1

    # ---- rendering ------------------------------------------------------------------------------
    def _flow_cells(self, i: int) -> list[int]:
        """Cells of device lane i where a flow arrives (an execution a host op launched)."""
        lane = self.lanes[i]
        if lane.kind != "device":  # flows into probes and autograd threads would mark every op
            return []
        fs = lane.flow_starts if lane.flow_starts is not None else self._flow_starts.get(i)
        if fs is None:
            if self._dst_sorted is None:
                self._dst_sorted = sorted_unique(self.flow_dst)
            fs = self._flow_starts[i] = np.sort(lane.starts[np.isin(lane.rows, self._dst_sorted)])
        a, b = searchsorted(fs, [int(self.t0), int(self.t1)])
        if b - a > self.cells * 4:  # a flow per cell or more says nothing: the boxes show the work
            return []
        return sorted({self.cell_of(float(t)) for t in fs[a:b]})

    def _cells(self, i: int) -> LaneCells | np.ndarray:
        """Lane i's cells (counter levels for a counter lane) over the window, cached per window: a
        cursor move only repaints."""
        key = (self.t0, self.t1, self.cells)
        if key != self._cells_key:
            self._cells_cache.clear()
            self._cells_key = key
        got = self._cells_cache.get(i)
        if got is None:
            lane = self.lanes[i]
            got = (counter_levels if lane.is_counter else slice_cells)(lane, self.t0, self.t1, self.cells)
            self._cells_cache[i] = got
        return got

    def _line(self, i: int, cursor: int) -> list[Segment]:
        lane, cells = self.lanes[i], self._cells(i)
        if isinstance(cells, np.ndarray):
            return self.painter.counter_line(lane.kind, cells, cursor)
        return self.painter.slice_line(
            lane.kind,
            cells,
            hits=self.hits,
            selected=self._selected_row if i == self.lane else -1,
            linked=self._linked,
            flow_cells=self._flow_cells(i),
            cursor=cursor,
        )

    def render_line(self, y: int) -> Strip:
        key = (self.t0, self.t1, self.size, self.cursor_ns, self.lane, self.has_focus, self._counter_top,
               self.scroll_offset.y, id(self.hits), len(self.lanes))
        if key != self._cache_key:
            # what every line of a frame shares, worked out once (Textual's geometry is not free)
            self._cache.clear()
            self._cache_key = key
            self._selected_row = self.selected()[1]
            self._linked = set(self.linked(self._selected_row)) if self._selected_row >= 0 else set()
            self._frame = (self.label_width, self.cell_of(self.cursor_ns), self.content_width, self.rich_style)
        label_width, cursor, width, base = self._frame
        i = self.lane_at_row(y)
        if i < 0:
            return Strip.blank(width, base)
        hit = self._cache.get(i)
        if hit is not None:
            return hit
        lane = self.lanes[i]
        selected = i == self.lane
        segs = [
            Segment(fit_label(printable(lane.label), label_width),
                    base + Style(bold=selected, reverse=selected and self.has_focus, dim=lane.depth > 0)),
            Segment("│", base),
            *self._line(i, cursor),
        ]
        strip = Strip(segs).crop_extend(0, width, base)
        self._cache[i] = strip
        return strip

    # ---- mouse ---------------------------------------------------------------------------------
    def on_click(self, event: Click) -> None:
        """A click picks the lane under it and puts the cursor at the clicked time."""
        lane = self.lane_at_row(event.y)
        if lane >= 0:
            self.lane = lane
        cell = event.x - self.label_width - 1
        if 0 <= cell < self.cells:
            self.cursor_ns = self.time_of(cell)
        self.refresh()
        self._changed()

    def _wheel(self, event: MouseScrollUp | MouseScrollDown, factor: float) -> None:
        cell = event.x - self.label_width - 1
        if 0 <= cell < self.cells:  # over the lanes: zoom at the mouse; over the names: scroll
            event.prevent_default()
            event.stop()
            self.action_zoom(factor, at=self.time_of(cell))

    def on_mouse_scroll_up(self, event: MouseScrollUp) -> None:
        self._wheel(event, 0.8)

    def on_mouse_scroll_down(self, event: MouseScrollDown) -> None:
        self._wheel(event, 1.25)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()
