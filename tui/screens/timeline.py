"""Timeline: a flame chart of host threads, device queues and engines, probes, with counters under it.

Keys: ←/→ move the cursor, shift+←/→ pan, +/- (or the mouse wheel) zoom, 0 the profiled steps, ↑/↓
lane, [ ] previous/next slice, / search slices by name (n/N step through matches, esc clears), enter
the selected slice's detail, f follow its flow (host op → device execution and back). Other views
jump here with `t`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

import numpy as np
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.widgets import Input, Static

from neuron_prof.analysis.fmt import fmt_bytes, fmt_ns, fmt_ts, printable
from neuron_prof.model.order import searchsorted
from neuron_prof.tui._data import RankTable
from neuron_prof.tui._lanes import Lane, build_lanes, depth_lane, first_window
from neuron_prof.tui._slice_info import slice_facts
from neuron_prof.tui.screens.base import ViewScreen
from neuron_prof.tui.screens.slice_detail import SliceDetailScreen
from neuron_prof.tui.widgets.timeline import LABEL_W, Timeline

LANES = RankTable("lanes", lambda rank: build_lanes(rank.trace, rank.depth, rank.origin, region=rank.span,
                                                    empty=rank.context.empty, pages=rank.context))
WINDOW = RankTable("view", lambda rank: first_window(rank.trace, rank.span))


def _tick(ns: float) -> str:
    """An axis label: whole µs ("+250 µs"), the one duration spelling otherwise."""
    return fmt_ns(ns, us_digits=0)


def _label_at(t: float) -> str:
    return _tick(t) if t >= 0 else "-" + _tick(-t)


def axis_line(t0: float, t1: float, width: int, label_w: int = LABEL_W, title: str = "") -> str:
    """The time axis over the lanes: the left edge's time since the region start, then ticks as offsets
    from it ("+250 ms") up to the right edge, whose label ends at the last column. Ticks are as many as
    fit (one per ~16 cells); labels that would touch are dropped, the edges never. `title` (the rank)
    goes over the lane names."""
    cells = max(1, width - label_w - 1)
    ticks = max(1, min(8, cells // 16))
    line = [" "] * width
    title = title[:label_w]
    line[: len(title)] = title  # over the lane names: which trace (rank) this is
    left = _label_at(t0)
    right = "+" + _tick(t1 - t0)
    line[label_w + 1 : label_w + 1 + len(left)] = left
    line[width - len(right) :] = right
    for k in range(1, ticks):
        label = "+" + _tick((t1 - t0) * k / ticks)
        col = label_w + 1 + round(cells * k / ticks)
        start = max(0, min(col - len(label) // 2, width - len(label)))
        if all(c == " " for c in line[max(0, start - 2) : start + len(label) + 2]):
            line[start : start + len(label)] = label
    return "".join(line[:width])


class TimelineScreen(ViewScreen):
    """The trace on one time axis, with a cursor that the status line describes."""

    VIEW = "timeline"
    TITLE = "Timeline"
    HELP = "timeline"
    TABLES = (LANES, WINDOW)
    LOADING = "the timeline's lanes"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("t", "jump", "Centre", show=False),
        Binding("slash", "filter", "Search"),
        Binding("enter", "detail", "Detail"),
        Binding("escape", "clear_filter", "Clear search", show=False),
    ]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # the base hides filter keys where there is no table; here `/` searches the timeline
        if action in ("filter", "clear_filter"):
            return True
        return super().check_action(action, parameters)

    def compose_body(self) -> Iterable[Widget]:
        rank = self.rank
        tr = rank.trace
        self.timeline = Timeline(
            LANES.of(self.data),
            tr.slices.name,
            tr.strings,
            rank.span,
            origin=rank.origin,
            view=WINDOW.of(self.data),
            flows=(tr.flows.src, tr.flows.dst),
            id="timeline",
        )
        self.matches = np.zeros(0, dtype=np.int64)
        """Search matches: slice rows in time order."""
        self.query_text = ""
        self._follow: tuple[int, int, int] = (-1, 0, -1)
        """(slice whose links `f` walks, next link, slice shown last)."""
        yield Static(id="axis")
        yield self.timeline
        search = Input(placeholder="search slices by name; enter finds, esc cancels", id="search")
        search.display = False
        yield search
        yield Static(id="status")

    def ready(self) -> None:
        self.timeline.focus()
        self._apply_pending_jump()
        self._update()

    async def on_screen_resume(self) -> None:
        # after a rebuild for another rank, so the jump lands on that rank's timeline
        await super().on_screen_resume()
        self._apply_pending_jump()

    def _apply_pending_jump(self) -> None:
        target = self.np_app.pending_jump
        if target is not None and self.is_mounted:
            self.np_app.pending_jump = None
            ts, track, row = target
            if row is not None:
                self._show_lane_of(row)
            self.timeline.jump(ts, track)
            self.timeline.focus()

    def _show_lane_of(self, row: int) -> int:
        """The index of slice `row`'s lane, adding it when it is deeper than the lanes shown (a jump to
        aten::mm must not land on its parent aten::matmul); -1 when its track has no lane."""
        tl, rank = self.timeline, self.rank
        track, depth = int(rank.trace.slices.track[row]), int(rank.depth[row])
        mine = [i for i, lane in enumerate(tl.lanes) if lane.track == track and not lane.is_counter]
        if not mine:
            return -1
        for i in mine:
            if int(tl.lanes[i].depth) == depth or tl.lanes[i].kind not in ("thread", "device"):
                return i
        tl.insert_lane(mine[-1] + 1, depth_lane(rank.trace, rank.depth, rank.origin, row))
        return mine[-1] + 1

    def show_row(self, row: int) -> None:  # type: ignore[override]
        """Select slice `row` on its lane, in view."""
        i = self._show_lane_of(row)
        if i < 0:
            return
        s, o = self.rank.trace.slices, self.rank.origin
        start = float(int(s.ts_ns[row]) - o)
        self.timeline.show_slice(i, row, start, start + float(max(int(s.dur_ns[row]), 0)))

    # ---- search --------------------------------------------------------------------------------
    def action_filter(self) -> None:
        """`/`: the search box."""
        box = self.query_one("#search", Input)
        box.display = True
        box.value = self.query_text
        box.focus()

    def search(self, text: str) -> int:
        """Mark the slices whose name holds `text` (any case) and show the first at or after the cursor.
        Returns how many match."""
        self.query_text = text
        tl, tr = self.timeline, self.rank.trace
        if not text:
            self.action_clear_filter()
            return 0
        needle = text.lower()
        ids = np.array([i for i, s in enumerate(tr.strings.as_list()) if needle in s.lower()], dtype=np.int64)
        hits = np.isin(tr.slices.name, ids) if len(ids) else np.zeros(len(tr.slices), dtype=bool)
        rows = np.flatnonzero(hits)
        self.matches = rows[np.argsort(tr.slices.ts_ns[rows], kind="stable")]
        tl.set_hits(hits)
        if len(self.matches):
            self.step_match(1, inclusive=True)
        self._update()
        return len(self.matches)

    def step_match(self, direction: int, inclusive: bool = False) -> None:
        """Show the next (1) or previous (-1) match in time order, wrapping around: after the selected
        slice when it is a match, else after the cursor."""
        if not len(self.matches):
            return
        _, cur = self.timeline.selected()
        at = np.flatnonzero(self.matches == cur) if cur >= 0 and not inclusive else np.zeros(0, np.int64)
        if len(at):
            k = int(at[0]) + direction
        else:
            ts = self.rank.trace.slices.ts_ns[self.matches]
            now = self.timeline.cursor_abs
            k = int(searchsorted(ts, now, side="left")) - (0 if direction > 0 else 1)
        self.show_row(int(self.matches[k % len(self.matches)]))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        event.input.display = False
        self.timeline.focus()
        self.search(event.value.strip())

    def action_clear_filter(self) -> None:
        box = self.query_one("#search", Input)
        if box.display:
            box.display = False
            self.timeline.focus()
            return
        self.query_text = ""
        self.matches = np.zeros(0, dtype=np.int64)
        self.timeline.set_hits(None)
        self._update()

    def on_timeline_step_match(self, event: Timeline.StepMatch) -> None:
        self.step_match(event.direction)

    # ---- detail and flows ---------------------------------------------------------------------
    def action_detail(self) -> None:
        """Enter: the selected slice's arguments, call site and linked slices."""
        tl = self.timeline
        lane, row = tl.selected()
        if lane is None:
            return
        if row < 0:
            facts = [("lane", printable(lane.label)), ("full name", printable(lane.title))]
            self.app.push_screen(SliceDetailScreen(printable(lane.label), facts))
            return
        rank = self.rank
        facts = slice_facts(rank.trace, rank.context, row, rank.origin, tl.linked(row), self.app.size.width)
        self.app.push_screen(SliceDetailScreen(printable(rank.trace.slice_name(row)), facts))

    def on_timeline_follow_flow(self, event: Timeline.FollowFlow) -> None:
        """`f`: show the first slice a flow links the selected one to (the device execution a host op
        launched, or the host op that launched an execution); `f` again walks the same slice's other
        links, then comes back to it."""
        origin, k, shown = self._follow
        if event.row != shown or origin < 0:
            origin, k = event.row, 0
        linked = self.timeline.linked(origin)
        if not linked:
            self.notify("no flow from or to this slice", markup=False)
            return
        if k >= len(linked):  # every link shown: back where `f` started
            self._follow = (-1, 0, -1)
            self.show_row(origin)
            return
        self._follow = (origin, k + 1, linked[k])
        self.show_row(linked[k])

    # ---- axis and status ---------------------------------------------------------------------
    def on_timeline_cursor_moved(self, _event: Timeline.CursorMoved) -> None:
        self._update()

    def on_resize(self) -> None:
        self._update()

    def _update(self) -> None:
        tl = self.timeline
        width = tl.content_width
        self.query_one("#axis", Static).update(
            Text(axis_line(tl.t0, tl.t1, width, label_w=tl.label_width, title=printable(self.rank.rank_label)),
                 style="dim")
        )
        status = Text(no_wrap=True, overflow="ellipsis")
        if len(self.matches) or self.query_text:
            status.append(f"/{printable(self.query_text)} ", style="bold")
            status.append(f"{len(self.matches):,} found  ", style="dim")
        lane, row = tl.selected()
        if lane is not None:
            status.append(printable(self._lane_name(lane)), style="bold")
            status.append(" ")
            if lane.is_counter:
                v = lane.value_at(tl.cursor_ns)
                status.append(fmt_bytes(v) if v is not None else "-")
            elif row >= 0:
                tr = self.rank.trace
                status.append(printable(tr.slice_name(row)))
                status.append(
                    f"  {fmt_ns(int(tr.slices.dur_ns[row]))} at "
                    f"{fmt_ts(int(tr.slices.ts_ns[row]), self.rank.origin)}",
                    style="dim",
                )
            else:
                status.append("idle", style="dim")
        status.append(f"  cursor {fmt_ts(tl.cursor_ns, 0)}", style="dim")
        self.query_one("#status", Static).update(status)

    def _lane_name(self, lane: Lane) -> str:
        """A lane's name for the status line: a depth lane by its thread ("host main d3")."""
        if not lane.depth:
            return lane.label
        top = next((x for x in self.timeline.lanes if x.track == lane.track and x.depth == 0), None)
        return f"{top.label if top is not None else lane.label.strip()} d{lane.depth}"

    def jump_target(self) -> tuple[int | None, int | None]:
        return None, None

    def action_jump(self) -> None:
        """Already here: `t` centres the window on the cursor."""
        tl = self.timeline
        w = tl.t1 - tl.t0
        tl.set_window(tl.cursor_ns - w / 2, tl.cursor_ns + w / 2)
