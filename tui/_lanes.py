"""Timeline lanes: one row per (track, depth) with sorted interval arrays, binned per frame with searchsorted.

Times in a lane are ns since the trace's first event (`origin`), not Unix ns: a float64 holds Unix ns
only to 256 ns, which would blur the binning and the cursor.

Binning cost depends on lanes x width x log(n), not on how many slices are visible (textual-facts.md:
2-3.5 ms per frame at 1M slices, against 0.5 s for a Python loop over slices). Pure numpy, no Textual.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from neuron_prof.analysis import find_steps
from neuron_prof.model import Trace, TrackKind
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
            i = np.searchsorted(self.starts, edges[1:], side="right") - 1
            vmax = float(self.values.max()) if len(self.values) else 0.0
            v = np.where(i >= 0, self.values[np.maximum(i, 0)], 0.0)
            fill = v / vmax if vmax > 0 else np.zeros(width)
            return fill, np.full(width, -1, dtype=np.int64)
        busy = self.busy_until(edges)
        fill = np.clip((busy[1:] - busy[:-1]) / np.maximum(edges[1:] - edges[:-1], 1e-9), 0.0, 1.0)
        mid = (edges[1:] + edges[:-1]) / 2
        i = np.searchsorted(self.starts, mid, side="right") - 1
        under = (i >= 0) & (self.ends[np.maximum(i, 0)] > mid) if len(self.starts) else np.zeros(width, bool)
        # a cell with time in it but nothing at its midpoint shows the first slice starting inside it
        j = np.searchsorted(self.starts, edges[:-1], side="left")
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
        i = np.searchsorted(self.starts, x, side="right") - 1
        k = np.maximum(i, 0)
        part = np.clip(x - self.starts[k], 0, self.ends[k] - self.starts[k])
        return np.where(i >= 0, self.cum[k] + part, 0.0)

    def at(self, t: float) -> int:
        """The slice row covering time t, or -1."""
        if self.is_counter or not len(self.starts):
            return -1
        # an int: a float would make searchsorted convert the whole int64 lane to float64
        i = int(np.searchsorted(self.starts, int(np.floor(t)), side="right")) - 1
        return int(self.rows[i]) if i >= 0 and self.ends[i] > t else -1

    def value_at(self, t: float) -> float | None:
        if not self.is_counter or not len(self.starts):
            return None
        i = int(np.searchsorted(self.starts, int(np.floor(t)), side="right")) - 1
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
    trace: Trace, rows: np.ndarray, origin: int, label: str, track: int, depth: int, title: str = ""
) -> Lane:
    """A lane of slice `rows` (one track, one depth), sorted by start."""
    s = trace.slices
    r = rows[np.argsort(s.ts_ns[rows], kind="stable")]
    st = s.ts_ns[r] - origin
    en = np.maximum(st + s.dur_ns[r], st)
    cum = np.zeros(len(r) + 1, dtype=np.int64)
    np.cumsum(en - st, out=cum[1:])
    kind = trace.tracks[track].kind
    return Lane(label=label, kind=kind, track=track, depth=depth, starts=st, ends=en, rows=r.astype(np.int64),
                cum=cum, title=title or lane_title(trace, track) + (f", depth {depth}" if depth else ""))


def depth_lane(trace: Trace, depth: np.ndarray, origin: int, row: int) -> Lane:
    """The lane of slice `row`'s track at its depth (for a jump to a slice deeper than the lanes shown)."""
    track, d = int(trace.slices.track[row]), int(depth[row])
    rows = np.flatnonzero((trace.slices.track == track) & (depth == d))
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
    a = max(int(np.searchsorted(ts, lo, side="right")) - 1, 0)
    b = int(np.searchsorted(ts, hi, side="right"))
    return np.arange(a, max(a, b), dtype=np.int64)


def build_lanes(
    trace: Trace,
    depth: np.ndarray,
    origin: int,
    max_depth: int = 4,
    region: tuple[int, int] | None = None,
) -> list[Lane]:
    """Lanes for every track with events, host threads first and counters last; times relative to `origin`.

    Host threads get one lane per nesting depth (0 = top level) up to `max_depth` (the flame chart of
    their stacks), device tracks up to depth 2; probe tracks one lane. Counter samples are clipped to `region` (default: `profiled_region`).
    """
    s = trace.slices
    lo, hi = region if region is not None else profiled_region(trace)
    order = sorted(range(len(trace.tracks)), key=lambda i: _order_key(trace, i))
    c = trace.counters
    used = set(np.unique(s.track).tolist()) | set(np.unique(c.track).tolist())
    names = lane_names(trace, [t for t in order if t in used])
    by_track = np.argsort(s.track, kind="stable")
    tr_sorted = s.track[by_track]
    lanes: list[Lane] = []
    for t in order:
        kind = trace.tracks[t].kind
        if trace.tracks[t].is_counter:
            rows = np.flatnonzero(c.track == t)
            if len(rows):
                rows = rows[np.argsort(c.ts_ns[rows], kind="stable")]
                rows = rows[clip_samples(c.ts_ns[rows], lo, hi)]
            if len(rows):
                lanes.append(
                    Lane(
                        label=names[t],
                        title=lane_title(trace, t),
                        kind=kind,
                        track=t,
                        starts=c.ts_ns[rows] - origin,
                        ends=c.ts_ns[rows] - origin,
                        rows=rows,
                        values=c.value[rows],
                    )
                )
            continue
        a, b = np.searchsorted(tr_sorted, [t, t + 1])
        rows = by_track[a:b]
        if not len(rows):
            continue
        deep = max_depth if kind == TrackKind.THREAD else min(max_depth, 2) if kind == TrackKind.DEVICE else 0
        for d in range(0, min(int(depth[rows].max()), deep) + 1):
            r = rows[depth[rows] == d]
            if len(r):
                lanes.append(slice_lane(trace, r, origin, names[t] if d == 0 else _depth_label(d), t, d))
    return lanes
