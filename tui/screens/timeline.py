"""Timeline: lanes for host threads, device queues, compile, fallback, sync, collectives and memory.

Keys: ←/→ move the cursor, shift+←/→ pan, +/- zoom around the cursor, 0 whole trace, ↑/↓ lane,
n/N next/previous slice on the lane. Other views jump here with `t`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widget import Widget
from textual.widgets import Static

from neuron_prof.tui._fmt import fmt_bytes, fmt_ns, fmt_ts, printable
from neuron_prof.tui._lanes import depth_lane
from neuron_prof.tui.screens._base import ViewScreen
from neuron_prof.tui.widgets.timeline import LABEL_W, Timeline


def axis_line(t0: float, t1: float, width: int, ticks: int = 4, label_w: int = LABEL_W) -> str:
    """Time labels (ms since the trace start) at 0, 1/4, ... 1 of the window, each at its own column
    (`label_w`: the lanes' label column)."""
    cells = max(1, width - label_w - 1)
    line = [" "] * width
    for k in range(ticks + 1):
        label = fmt_ts(t0 + (t1 - t0) * k / ticks, 0)
        col = label_w + 1 + round(cells * k / ticks)
        # the first label starts at its tick, the last ends at it, the others are centred on it
        start = col if k == 0 else col - len(label) if k == ticks else col - len(label) // 2
        start = max(0, min(start, width - len(label)))
        if all(c == " " for c in line[max(0, start - 1) : start + len(label) + 1]):
            line[start : start + len(label)] = label
    return "".join(line)


class TimelineScreen(ViewScreen):
    """The trace on one time axis, with a cursor that the status line describes."""

    VIEW = "timeline"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("t", "jump", "Centre")]

    def compose_body(self) -> Iterable[Widget]:
        rank = self.rank
        tr = rank.trace
        self.timeline = Timeline(
            rank.lanes, tr.slices.name, tr.strings, rank.span, origin=rank.origin, id="timeline"
        )
        yield Static(id="axis")
        yield self.timeline
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

    def _show_lane_of(self, row: int) -> None:
        """Add the lane of slice `row` when it is deeper than the lanes shown: a jump to aten::mm must not
        land on its parent aten::matmul."""
        tl, rank = self.timeline, self.rank
        track = int(rank.trace.slices.track[row])
        mine = [i for i, lane in enumerate(tl.lanes) if lane.track == track]
        if not mine or any(int(tl.lanes[i].depth) == int(rank.depth[row]) for i in mine):
            return
        tl.insert_lane(mine[-1] + 1, depth_lane(rank.trace, rank.depth, rank.origin, row))

    def on_timeline_cursor_moved(self, _event: Timeline.CursorMoved) -> None:
        self._update()

    def on_resize(self) -> None:
        self._update()

    def _update(self) -> None:
        tl = self.timeline
        width = tl.size.width or self.app.size.width
        self.query_one("#axis", Static).update(Text(axis_line(tl.t0, tl.t1, width, label_w=tl.label_width), style="dim"))
        status = Text()
        status.append("cursor ", style="dim")
        status.append(fmt_ts(tl.cursor_ns, 0), style="bold")  # the timeline counts from the trace start
        status.append(f"  window {fmt_ns(tl.t1 - tl.t0)}  ", style="dim")
        lane, row = tl.under_cursor()
        if lane is not None:
            status.append(printable(lane.label), style="bold")
            status.append(": ")
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
        self.query_one("#status", Static).update(status)

    def jump_target(self) -> tuple[int | None, int | None]:
        return None, None

    def action_jump(self) -> None:
        """Already here: `t` centres the window on the cursor."""
        tl = self.timeline
        w = tl.t1 - tl.t0
        tl.set_window(tl.cursor_ns - w / 2, tl.cursor_ns + w / 2)
