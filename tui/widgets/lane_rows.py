"""LaneRows: the rows of the timeline, apart from time. Slice lanes scroll; counter lanes stay pinned
under them. Owns which lane is on which row, the label column and the selected lane; `Timeline` adds the
time window and the drawing."""

from __future__ import annotations

from textual.geometry import Size
from textual.scroll_view import ScrollView

from neuron_prof.analysis.fmt import cut, printable
from neuron_prof.tui._lanes import Lane

LABEL_W = 8
"""The narrowest label column; it widens to the longest lane name, up to a quarter of the width."""
PINNED = 4
"""At most this many counter lanes stay pinned under the slice lanes (more scroll within them)."""


def fit_label(label: str, width: int) -> str:
    """A lane label in `width` cells, cut at its end with "…"."""
    return cut(label, width).ljust(width)


class LaneRows(ScrollView):
    """Slice lanes first (scrolled), counter lanes after them (pinned); `lane` is the selected one."""

    def __init__(self, lanes: list[Lane], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lanes = [lane for lane in lanes if not lane.is_counter] + [lane for lane in lanes if lane.is_counter]
        self.lane = 0
        """Index of the selected lane."""
        self._n_slice = sum(1 for lane in self.lanes if not lane.is_counter)
        self._counter_top = 0
        self._longest = max((len(printable(lane.label)) for lane in self.lanes), default=0)

    @property
    def n_slice_lanes(self) -> int:
        """Slice lanes come first in `lanes`, counter lanes after them."""
        return self._n_slice

    @property
    def pinned(self) -> int:
        """Rows given to counter lanes: up to PINNED (a third of the height), more where the slice lanes
        leave room."""
        n, h = len(self.lanes) - self.n_slice_lanes, self.size.height or 24
        return min(n, max(min(PINNED, h // 3), h - self.n_slice_lanes))

    @property
    def content_width(self) -> int:
        """Columns the lanes are drawn in (the vertical scrollbar takes the rest)."""
        return self.scrollable_content_region.width or self.size.width or 80

    @property
    def label_width(self) -> int:
        """Cells of the label column: the longest name, at least LABEL_W and at most a quarter of the width."""
        return max(LABEL_W, min(self._longest, self.content_width // 4))

    def lane_at_row(self, y: int) -> int:
        """The lane index drawn on widget row `y` (-1 for none)."""
        h, pinned = self.size.height, self.pinned
        # the counters sit right under the last slice lane, or pinned to the bottom when lanes scroll
        top = min(h - pinned, self.n_slice_lanes - self.scroll_offset.y)
        if pinned and top <= y < top + pinned:
            i = self.n_slice_lanes + self._counter_top + (y - top)
        elif y >= top:
            return -1
        else:
            i = self.scroll_offset.y + y
            if i >= self.n_slice_lanes:
                return -1
        return i if 0 <= i < len(self.lanes) else -1

    def insert_lane(self, index: int, lane: Lane) -> None:
        """Show slice lane `lane` at position `index` (a deeper lane a jump needs)."""
        self.lanes.insert(min(index, self.n_slice_lanes), lane)
        self._n_slice += 1
        self._longest = max(self._longest, len(printable(lane.label)))
        self.rows_changed()
        self._sync_size()

    def rows_changed(self) -> None:
        """Lanes moved to other rows: subclasses drop what they cached per row."""

    def _sync_size(self) -> None:
        self.virtual_size = Size(self.size.width, self.n_slice_lanes + self.pinned)
        self.refresh()

    def _scroll_to_lane(self) -> None:
        """Bring the selected lane into view (scrolling the counters when it is one of them)."""
        if self.lane >= self.n_slice_lanes:
            k = self.lane - self.n_slice_lanes
            if k < self._counter_top:
                self._counter_top = k
            elif k >= self._counter_top + self.pinned:
                self._counter_top = k - self.pinned + 1
            self.rows_changed()
            return
        top, h = self.scroll_offset.y, max(1, self.size.height - self.pinned)
        if self.lane < top:
            self.scroll_to(y=self.lane, animate=False, immediate=True)
        elif self.lane >= top + h:
            self.scroll_to(y=self.lane - h + 1, animate=False, immediate=True)
