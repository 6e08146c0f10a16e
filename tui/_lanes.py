"""Timeline lanes: one row per (track, depth) with sorted interval arrays, binned per frame with searchsorted.

Times in a lane are ns since the trace's first event (`origin`), not Unix ns: a float64 holds Unix ns
only to 256 ns, which would blur the binning and the cursor.

Binning cost depends on lanes x width x log(n), not on how many slices are visible (textual-facts.md:
2-3.5 ms per frame at 1M slices, against 0.5 s for a Python loop over slices). Pure numpy, no Textual.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuron_prof.analysis import find_steps
from neuron_prof.model import Trace, TrackKind
from neuron_prof.model.order import deal_by_key, row_dtype, searchsorted, sorted_unique
from neuron_prof.model.windows import HasPages, row_windows
from neuron_prof.tui._lane_names import lane_names, lane_title

# top-to-bottom order of lane kinds on the timeline: device work first (an MTIA trace has ~140 host
# threads; its streams sat below all of them), then the threads of device processes (submission queues)
LANE_ORDER = (
    TrackKind.DEVICE,
    TrackKind.THREAD,
    TrackKind.COMPILE,
    TrackKind.FALLBACK,
    TrackKind.SYNC,
    TrackKind.COLLECTIVE,
    TrackKind.DTYPE,
    TrackKind.ASYNC,
    TrackKind.OTHER,
    TrackKind.MEMORY,
    TrackKind.COUNTER,
)
Empty = Callable[[int, Any], np.ndarray]
"""How a lane's arrays are made: `np.empty`, or `Context.empty` (mapped files for a big cached trace)."""
SHADES = " ░▒▓█"
BARS = " ▁▂▃▄▅▆▇█"


@dataclass
class Lane:
    """One timeline row. Slice lanes hold sorted starts/ends; counter lanes hold (ts, value) samples."""

    label: str
    """Short name ("host main", "nc0 exec"; see _lane_names)."""
    kind: str
    track: int
    depth: int = 0
    starts: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    ends: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    """Slice rows (indices into trace.slices) in the order of `starts`."""
    cum: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))
    """cum[k] = total duration of the first k intervals (length n+1)."""
    values: np.ndarray | None = None
    """Counter lanes: sample values aligned with `starts`."""
    title: str = ""
    """Full name: process and track as the trace names them."""
    flow_starts: np.ndarray | None = None
    """Device lanes from `build_lanes`: the starts (ascending) of the slices a flow arrives at (an execution a
    host op launched); None: not worked out (the timeline finds them when it draws the lane)."""

    _ends_sorted: np.ndarray | None = field(default=None, repr=False)

    @property
    def ends_sorted(self) -> np.ndarray:
        """`ends` in increasing order (the same array when slices do not overlap, as on one depth)."""
        if self._ends_sorted is None:
            e = self.ends
            self._ends_sorted = e if len(e) < 2 or bool((e[1:] >= e[:-1]).all()) else np.sort(e)
        return self._ends_sorted

    @property
    def is_counter(self) -> bool:
        return self.values is not None

    def bin(self, t0: float, t1: float, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Per cell of [t0, t1) split in `width`: (fill 0-1, slice row under the cell or -1).

        For a counter lane, fill is the latest value at the cell's end over the lane maximum.
        """
        edges = np.linspace(t0, t1, width + 1)
        if self.is_counter:
            assert self.values is not None
            i = searchsorted(self.starts, edges[1:], side="right") - 1
            vmax = float(self.values.max()) if len(self.values) else 0.0
            v = np.where(i >= 0, self.values[np.maximum(i, 0)], 0.0)
            fill = v / vmax if vmax > 0 else np.zeros(width)
            return fill, np.full(width, -1, dtype=np.int64)
        busy = self.busy_until(edges)
        fill = np.clip((busy[1:] - busy[:-1]) / np.maximum(edges[1:] - edges[:-1], 1e-9), 0.0, 1.0)
        mid = (edges[1:] + edges[:-1]) / 2
        i = searchsorted(self.starts, mid, side="right") - 1
        under = (i >= 0) & (self.ends[np.maximum(i, 0)] > mid) if len(self.starts) else np.zeros(width, bool)
        # a cell with time in it but nothing at its midpoint shows the first slice starting inside it
        j = searchsorted(self.starts, edges[:-1], side="left")
        inside = (
            (j < len(self.starts)) & (self.starts[np.minimum(j, len(self.starts) - 1)] < edges[1:])
            if len(self.starts)
            else np.zeros(width, bool)
        )
        row = np.where(
            under,
            self.rows[np.maximum(i, 0)] if len(self.rows) else -1,
            np.where(inside, self.rows[np.minimum(j, len(self.rows) - 1)] if len(self.rows) else -1, -1),
        )
        return fill, row.astype(np.int64)

    def busy_until(self, x: np.ndarray) -> np.ndarray:
        """Busy time from the lane's start until each x (exact, from the cumulative durations)."""
        if not len(self.starts):
            return np.zeros(len(x))
        i = searchsorted(self.starts, x, side="right") - 1
        k = np.maximum(i, 0)
        part = np.clip(x - self.starts[k], 0, self.ends[k] - self.starts[k])
        return np.where(i >= 0, self.cum[k] + part, 0.0)

    def at(self, t: float) -> int:
        """The slice row covering time t, or -1."""
        if self.is_counter or not len(self.starts):
            return -1
        # an int: a float would make searchsorted convert the whole int64 lane to float64
        i = int(searchsorted(self.starts, int(np.floor(t)), side="right")) - 1
        return int(self.rows[i]) if i >= 0 and self.ends[i] > t else -1

    def value_at(self, t: float) -> float | None:
        if not self.is_counter or not len(self.starts):
            return None
        i = int(searchsorted(self.starts, int(np.floor(t)), side="right")) - 1
        return float(self.values[i]) if i >= 0 and self.values is not None else None


def _depth_label(depth: int) -> str:
    return f"  └ depth {depth}"


def _order_key(trace: Trace, i: int) -> tuple[int, int, int, int, int]:
    t = trace.tracks[i]
    kind = LANE_ORDER.index(t.kind) if t.kind in LANE_ORDER else len(LANE_ORDER)
    on_device = 0 if trace.processes[t.process].kind == "device" else 1
    sort = t.sort_index if isinstance(t.sort_index, int) else 0
    return kind, on_device, t.process, sort, i


def slice_lane(
    trace: Trace, rows: np.ndarray, origin: int, label: str, track: int, depth: int, title: str = "",
    empty: Empty = np.empty, pages: HasPages | None = None, arrivals: np.ndarray | None = None,
) -> Lane:
    """A lane of slice `rows` (one track, one depth, in table order), sorted by start (stable).

    Its arrays come from `empty(n, dtype)` (`Context.empty`: mapped files for a big cached trace) and are
    written a window of rows at a time (`row_windows`, `pages` handing back the pages read: the trace by
    default); rows that already come in start order (a loader's usual order) are not sorted again. `arrivals`
    (a bool per slice row: a flow arrives there) gives the lane its `flow_starts`."""
    s = trace.slices
    pages = pages if pages is not None else trace
    n = len(rows)
    dt = row_dtype(len(s))
    if _ascending(s.ts_ns, rows, pages):
        r = rows.astype(dt, copy=False)  # kept as it is (`build_lanes` deals them into arrays of `empty`)
    else:
        r = empty(n, dt)
        o = np.argsort(s.ts_ns[rows], kind="stable")
        for a, z in row_windows(pages, n):
            r[a:z] = rows[o[a:z]]
        del o
    st, en, cum = empty(n, np.int64), empty(n, np.int64), empty(n + 1, np.int64)
    cum[0] = 0
    ends_ascend, last_end = True, None
    for a, z in row_windows(pages, n):
        w = r[a:z]
        st[a:z] = s.ts_ns[w] - origin
        en[a:z] = np.maximum(st[a:z] + s.dur_ns[w], st[a:z])
        np.cumsum(en[a:z] - st[a:z], out=cum[a + 1:z + 1])
        cum[a + 1:z + 1] += cum[a]
        e = en[a:z] if last_end is None else np.r_[last_end, en[a:z]]
        ends_ascend = ends_ascend and bool((e[1:] >= e[:-1]).all())
        last_end = en[z - 1]
    kind = trace.tracks[track].kind
    lane = Lane(label=label, kind=kind, track=track, depth=depth, starts=st, ends=en, rows=r, cum=cum,
                title=title or lane_title(trace, track) + (f", depth {depth}" if depth else ""))
    if ends_ascend:
        lane._ends_sorted = en  # no sort of the whole lane later (one depth's slices do not overlap)
    if arrivals is not None:
        m = sum(int(arrivals[r[a:z]].sum()) for a, z in row_windows(pages, n))
        fs, at = empty(m, np.int64), 0
        for a, z in row_windows(pages, n):
            got = st[a:z][arrivals[r[a:z]]]
            fs[at:at + len(got)] = got
            at += len(got)
        lane.flow_starts = fs
    return lane


def flow_arrivals(trace: Trace, empty: Empty = np.empty, pages: HasPages | None = None) -> np.ndarray:
    """A bool per slice row: whether a flow arrives at it (marked a window of flows at a time)."""
    n, dst = len(trace.slices), trace.flows.dst
    hit = empty(n, np.bool_)
    for a, z in row_windows(pages if pages is not None else trace, n):
        hit[a:z] = False
    for a, z in row_windows(pages if pages is not None else trace, len(dst)):
        d = dst[a:z]
        hit[d[(d >= 0) & (d < n)]] = True
    return hit


def _ascending(ts: np.ndarray, rows: np.ndarray, pages: HasPages) -> bool:
    """Whether `ts[rows]` never decreases (read a window at a time)."""
    last = None
    for a, z in row_windows(pages, len(rows)):
        t = ts[rows[a:z]]
        if last is not None:
            t = np.r_[last, t]
        if not bool((t[1:] >= t[:-1]).all()):
            return False
        last = t[-1]
    return True


def depth_lane(trace: Trace, depth: np.ndarray, origin: int, row: int) -> Lane:
    """The lane of slice `row`'s track at its depth (for a jump to a slice deeper than the lanes shown)."""
    track, d = int(trace.slices.track[row]), int(depth[row])
    tr = trace.slices.track
    rows = np.concatenate([a + np.flatnonzero((tr[a:z] == track) & (depth[a:z] == d))
                           for a, z in row_windows(trace, len(tr))] or [np.zeros(0, np.int64)])
    return slice_lane(trace, rows, origin, _depth_label(d), track, d)


def profiled_region(trace: Trace) -> tuple[int, int]:
    """(start, end) Unix ns of what was profiled: the recorded region when the capture wrote it
    (metadata ``wall_ns``), else the span of the slices and instants. Counters do not widen it: the
    runtime's memory counters can run on for seconds after the profiler stopped."""
    w = trace.metadata.get("wall_ns")
    if isinstance(w, (list, tuple)) and len(w) == 2 and int(w[1]) > int(w[0]):
        return int(w[0]), int(w[1])
    starts, ends = [], []
    s, i = trace.slices, trace.instants
    if len(s):
        starts.append(int(s.ts_ns.min()))
        ends.append(int((s.ts_ns + np.maximum(s.dur_ns, 0)).max()))
    if len(i):
        starts.append(int(i.ts_ns.min()))
        ends.append(int(i.ts_ns.max()))
    if not starts:
        return trace.time_range()
    return min(starts), max(max(ends), min(starts) + 1)


def first_window(trace: Trace, region: tuple[int, int]) -> tuple[int, int]:
    """The timeline's first window: the profiled steps within `region` (all of it when no steps are found)."""
    _, start, end = find_steps(trace)
    lo, hi = region
    if len(start):
        a, b = max(int(start.min()), lo), min(int(end.max()), hi)
        if b > a:
            return a, b
    return lo, hi


def clip_samples(ts: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Indices of the counter samples (sorted `ts`) that matter in [lo, hi]: those inside and the last
    one before `lo` (it holds the value at the window's left edge)."""
    a = max(int(searchsorted(ts, lo, side="right")) - 1, 0)
    b = int(searchsorted(ts, hi, side="right"))
    return np.arange(a, max(a, b), dtype=np.int64)


def build_lanes(
    trace: Trace,
    depth: np.ndarray,
    origin: int,
    max_depth: int = 4,
    region: tuple[int, int] | None = None,
    empty: Empty = np.empty,
    pages: HasPages | None = None,
) -> list[Lane]:
    """Lanes for every track with events, host threads first and counters last; times relative to `origin`.

    Host threads get one lane per nesting depth (0 = top level) up to `max_depth` (the flame chart of
    their stacks), device tracks up to depth 2; probe tracks one lane. Counter samples are clipped to `region`
    (default: `profiled_region`). The slices are dealt to their lanes a window of rows at a time (`row_windows`)
    and each lane's arrays come from `empty` (`slice_lane`): no temporary spans every row of the trace.
    """
    s = trace.slices
    pages = pages if pages is not None else trace
    lo, hi = region if region is not None else profiled_region(trace)
    order = sorted(range(len(trace.tracks)), key=lambda i: _order_key(trace, i))
    c = trace.counters
    ntr, levels = max(len(trace.tracks), 1), max_depth + 2  # the last level: deeper than any lane
    flat = np.zeros(ntr * levels, dtype=np.int64)
    for a, z in row_windows(pages, len(s)):
        flat += np.bincount(_lane_key(s.track[a:z], depth[a:z], levels), minlength=ntr * levels)
    counts = flat.reshape(ntr, levels)
    used = set(np.flatnonzero(counts.sum(axis=1)).tolist()) | set(sorted_unique(c.track).tolist())
    names = lane_names(trace, [t for t in order if t in used])
    lane_of = np.full(ntr * levels, -1, dtype=np.int64)  # (track, level) -> place in `dealt`
    dealt: list[tuple[int, int]] = []  # (track, depth) of each slice lane, in lane order
    for t in order:
        kind = trace.tracks[t].kind
        deep = max_depth if kind == TrackKind.THREAD else min(max_depth, 2) if kind == TrackKind.DEVICE else 0
        for d in range(deep + 1):
            if not trace.tracks[t].is_counter and counts[t, d]:
                lane_of[t * levels + d] = len(dealt)
                dealt.append((t, d))
    rows = _deal(trace, depth, lane_of, sum(int(counts[t, d]) for t, d in dealt), levels, empty, pages)
    arrivals = flow_arrivals(trace, empty, pages) if any(trace.tracks[t].kind == TrackKind.DEVICE
                                                         for t, _ in dealt) else None
    lanes: list[Lane] = []
    k = 0
    for t in order:
        kind = trace.tracks[t].kind
        if trace.tracks[t].is_counter:
            cr = np.flatnonzero(c.track == t)
            if len(cr):
                cr = cr[np.argsort(c.ts_ns[cr], kind="stable")]
                cr = cr[clip_samples(c.ts_ns[cr], lo, hi)]
            if len(cr):
                lanes.append(
                    Lane(
                        label=names[t],
                        title=lane_title(trace, t),
                        kind=kind,
                        track=t,
                        starts=c.ts_ns[cr] - origin,
                        ends=c.ts_ns[cr] - origin,
                        rows=cr,
                        values=c.value[cr],
                    )
                )
            continue
        while k < len(dealt) and dealt[k][0] == t:
            d = dealt[k][1]
            lanes.append(slice_lane(trace, rows[k], origin, names[t] if d == 0 else _depth_label(d), t, d,
                                    empty=empty, pages=pages, arrivals=arrivals if kind == TrackKind.DEVICE else None))
            k += 1
    return lanes


def _lane_key(track: np.ndarray, depth: np.ndarray, levels: int) -> np.ndarray:
    """track * levels + depth, the depth capped at the last level."""
    return track.astype(np.int64) * levels + np.minimum(depth, levels - 1)


def _deal(trace: Trace, depth: np.ndarray, lane_of: np.ndarray, size: int, levels: int, empty: Empty,
          pages: HasPages) -> list[np.ndarray]:
    """Each lane's slice rows (`row_dtype`, table order), views of one array of `empty` (`size` rows in all), dealt
    a window of rows at a time (`deal_by_key`)."""
    s = trace.slices
    out = empty(size, row_dtype(len(s)))
    groups = deal_by_key(lambda a, z: lane_of[_lane_key(s.track[a:z], depth[a:z], levels)], len(s),
                         len(lane_of), out, pages)
    return [out[a:z] for _, a, z in groups]
