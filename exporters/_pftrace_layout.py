"""Track layout for the .pftrace writer: uuids, 32-bit pids/tids, display names, order, overlap lanes.

Perfetto nests slices on one track by time, so two slices that partly overlap (Kineto children that outlive
their parent, overlapping device streams) cannot share a track: one would swallow the other. `lanes()` finds
the tracks where that happens (vectorised test) and only for those runs a stack walk that moves each
offending slice to an extra "lane" track with the same name (Perfetto shows same-name siblings merged).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterator
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import DTypeLike

from neuron_prof.model import ProcessKind, Trace, Track, TrackKind, windows
from neuron_prof.model.order import deal_by_track, in_start_order, row_dtype, searchsorted, sorted_unique, start_order

# Display names of probe tracks in the Perfetto UI (the model's own name wins unless it is just the kind).
KIND_LABEL = {
    TrackKind.COMPILE: "compile", TrackKind.FALLBACK: "CPU fallback", TrackKind.SYNC: "sync",
    TrackKind.COLLECTIVE: "collectives", TrackKind.DTYPE: "dtype", TrackKind.FINDINGS: "findings",
}
# Order of tracks inside a process (lower first); threads keep their own sort_index inside their band.
KIND_RANK = {
    TrackKind.FINDINGS: 0, TrackKind.COMPILE: 1, TrackKind.FALLBACK: 2, TrackKind.SYNC: 3,
    TrackKind.COLLECTIVE: 4, TrackKind.DTYPE: 5, TrackKind.DEVICE: 6, TrackKind.THREAD: 7, TrackKind.ASYNC: 8,
    TrackKind.OTHER: 9, TrackKind.MEMORY: 10, TrackKind.COUNTER: 11,
}
_I32_MAX = (1 << 31) - 1
# Replacement ids for string, zero or over-32-bit pids/tids: small, stable for a given trace, disjoint per rank
# (so files of several ranks can be concatenated), skipping every id the trace already uses.
_REMAP_PID, _REMAP_TID, _REMAP_STEP = 1_000_000, 2_000_000, 10_000


@dataclass
class Layout:
    """Where every model track goes in the file."""

    rank: int
    pids: list[int]  # per process: the 32-bit pid written
    tids: dict[int, int]  # per thread track: the 32-bit tid written
    process_uuid: list[int]
    track_uuid: np.ndarray  # per track: uuid of lane 0
    lane_uuids: dict[int, list[int]] = field(default_factory=dict)  # track -> uuids of lanes 1..
    next_uuid: int = 1

    def new_uuid(self) -> int:
        u = (self.rank << 32) + self.next_uuid
        self.next_uuid += 1
        return u


def plan(trace: Trace, rank: int) -> Layout:
    """uuids and 32-bit ids for every process and track (lanes are added by `add_lanes`)."""
    lay = Layout(rank=rank, pids=[], tids={}, process_uuid=[], track_uuid=np.zeros(len(trace.tracks), np.uint64))
    used = {p.pid for p in trace.processes if _ok_id(p.pid)}
    fresh = _fresh_ids(_REMAP_PID + rank * _REMAP_STEP, used)
    for p in trace.processes:
        lay.pids.append(int(p.pid) if _ok_id(p.pid) else next(fresh))  # type: ignore[arg-type]
        lay.process_uuid.append(lay.new_uuid())
    used_t = {t.tid for t in trace.tracks if t.tid is not None and _ok_id(t.tid)}
    fresh_t = _fresh_ids(_REMAP_TID + rank * _REMAP_STEP, used_t | set(lay.pids))
    for i, t in enumerate(trace.tracks):
        lay.track_uuid[i] = lay.new_uuid()
        if t.tid is not None and not t.is_counter:
            lay.tids[i] = int(t.tid) if _ok_id(t.tid) else next(fresh_t)  # type: ignore[arg-type]
    return lay


def _ok_id(x: object) -> bool:
    # pid/tid 0 is the idle task in trace_processor; Perfetto's ids are 32-bit
    return isinstance(x, int) and not isinstance(x, bool) and 0 < x <= _I32_MAX


def _fresh_ids(start: int, used: Container[object]) -> Iterator[int]:
    n = start
    while True:
        if n not in used:
            yield n
        n += 1


def process_name(p: object, pid_written: int) -> str:
    from neuron_prof.model import Process

    assert isinstance(p, Process)
    name = p.name or f"process {p.pid}"
    if p.rank is not None and p.kind == ProcessKind.HOST and "rank" not in name.lower():
        name = f"{name} [rank {p.rank}]"
    if p.pid != pid_written and str(p.pid) not in name:
        name = f"{name} ({p.pid})"
    return name


def track_name(t: Track) -> str:
    if t.kind in KIND_LABEL and t.name in ("", t.kind):
        return KIND_LABEL[t.kind]
    if t.kind == TrackKind.DEVICE and not t.name:
        return "device"
    return t.name or t.kind


def process_order(trace: Trace) -> list[int]:
    """Process indices in display order: explicit sort_index, then host before device, then rank, then as given."""
    def key(i: int) -> tuple[int, int, int, int]:
        p = trace.processes[i]
        si = p.sort_index if p.sort_index is not None else 1 << 30
        return (si, 0 if p.kind == ProcessKind.HOST else 1, p.rank if p.rank is not None else 0, i)
    return sorted(range(len(trace.processes)), key=key)


def track_order(trace: Trace) -> list[int]:
    """Track indices in display order within their process."""
    def key(i: int) -> tuple[int, int, int]:
        t = trace.tracks[i]
        return (KIND_RANK.get(t.kind, 9), t.sort_index if t.sort_index is not None else 1 << 30, i)
    return sorted(range(len(trace.tracks)), key=key)


# ---- overlap lanes ------------------------------------------------------------------------------------
def slice_order(ts: np.ndarray, dur: np.ndarray, track: np.ndarray) -> np.ndarray:
    """Rows sorted by (track, start ascending, duration descending): the order that nests ties right."""
    return np.lexsort((-dur, ts, track))


def lanes(ts: np.ndarray, dur: np.ndarray, track: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Lane (0 = the track itself) of each slice row so that no two slices on one lane partly overlap.

    Semantics match how the writer emits slices: touching slices are siblings, identical ones nest.
    """
    n = len(ts)
    lane = np.zeros(n, np.int32)
    if n < 2:
        return lane
    bad_tracks = _tracks_with_overlaps(ts[order], dur[order], track[order])
    for t in bad_tracks.tolist():
        rows = order[track[order] == t]
        lane[rows] = _assign_lanes(ts[rows].tolist(), (ts[rows] + dur[rows]).tolist())
    return lane


def _tracks_with_overlaps(ts: np.ndarray, dur: np.ndarray, track: np.ndarray) -> np.ndarray:
    """Tracks holding a partly overlapping pair. Inputs are in `slice_order`.

    Walk opens and closes in time order (closes first at a tie; inner closes first): the family nests iff
    every slice sees the same depth just before it opens and just after it closes. (If slice a crossed b,
    a slice open before a would have to close inside a, crossing a; that cannot go on forever.)
    """
    keep = dur > 0  # a zero-length slice never forces a lane
    ts, dur, track = ts[keep], dur[keep], track[keep]
    n = len(ts)
    if n < 2:
        return np.zeros(0, np.int64)
    t0 = int(ts.min())
    span = int((ts + dur).max()) - t0 + 1
    ntr = int(track.max()) + 1
    if span * ntr >= 1 << 62:  # composite keys would overflow: check every track the slow way
        return sorted_unique(track)
    base = track.astype(np.int64) * span - t0
    key_o = base + ts
    key_c = base + ts + dur
    r = np.arange(n, dtype=np.int64)
    co = np.lexsort((-r, key_c))
    q = np.empty(n, np.int64)
    q[co] = r
    depth_open = r - searchsorted(key_c[co], key_o, side="right")
    depth_close = searchsorted(key_o, key_c, side="left") - (q + 1)
    return sorted_unique(track[depth_open != depth_close])


def _assign_lanes(starts: list[int], ends: list[int], stacks: list[list[int]] | None = None) -> list[int]:
    """Greedy: each slice goes to the first lane where it nests in (or follows) what is open there. `stacks`
    (the open ends of each lane) carries the walk over from one window of a track's slices to the next."""
    stacks = [] if stacks is None else stacks
    out = []
    for s, e in zip(starts, ends):
        for j, st in enumerate(stacks):
            while st and st[-1] <= s:
                st.pop()
            if not st or e <= st[-1]:
                st.append(e)
                out.append(j)
                break
        else:
            stacks.append([e])
            out.append(len(stacks) - 1)
    return out


# ---- the slices' places, a window at a time ----------------------------------------------------------
@dataclass
class Placement:
    """Where the writer puts every slice: `order`, the slice rows in writing order (by track, lane, start, longer
    first: `slice_order` with each track's lanes one after another), and the runs of one (track, lane) in it."""

    order: np.ndarray
    run_start: np.ndarray  # int64: first position in `order` of each run
    run_uuid: np.ndarray  # uint64: the track uuid of that run's slices

    def uuids(self, a: int, z: int) -> np.ndarray:
        """Track uuid of the slices at positions [a, z) of `order`."""
        return self.run_uuid[searchsorted(self.run_start, np.arange(a, z), side="right") - 1]


def place_slices(trace: Trace, lay: Layout, empty: Callable[[int, DTypeLike], np.ndarray]) -> Placement:
    """`order` and lanes (the same as `slice_order` + `lanes` + a stable sort by (track, lane) over every slice,
    lane uuids added to `lay` by track), made a window of rows or one track at a time: `order` (int32 for up to
    2**31 slices) comes from `empty` (a mapped file for a big cached trace), the temporaries span a window, or a
    track whose slices must be sorted or moved to lanes; a track already in start order (a loader's usual order)
    is not sorted. The slices of a counter track go one lane up (trace_processor drops slices on counters)."""
    sl = trace.slices
    order = empty(len(sl), row_dtype(len(sl)))
    starts: list[int] = []
    uuids: list[int] = []
    for tr, a, z in deal_by_track(sl.track, None, len(sl), len(trace.tracks), order, trace):
        seg = order[a:z]
        if not in_start_order(lambda i, j: _start_dur(trace, seg[i:j]), len(seg)):  # noqa: B023
            ts, end = _span(trace, seg)
            seg[:] = seg[start_order(ts, end - ts, np.zeros(len(seg), np.int8))]
        lane = None if _nests(trace, seg) else _lanes_of(trace, seg)
        counter = trace.tracks[tr].is_counter
        if lane is not None and counter:
            lane += 1
        n_l = int(lane.max()) if lane is not None else int(counter)
        if n_l:
            lay.lane_uuids[tr] = [lay.new_uuid() for _ in range(n_l)]
        uuid_of = [int(lay.track_uuid[tr]), *lay.lane_uuids.get(tr, [])]
        if lane is None or (not counter and n_l == 0):
            starts.append(a)
            uuids.append(uuid_of[int(counter)])
        else:  # each lane's slices one after another, in start order
            o = np.argsort(lane, kind="stable")
            seg[:] = seg[o]
            lane = lane[o]
            cut = np.flatnonzero(np.r_[True, lane[1:] != lane[:-1]])
            starts += (cut + a).tolist()
            uuids += [uuid_of[v] for v in lane[cut].tolist()]
        trace.drop_pages()
    return Placement(order, np.asarray(starts, np.int64), np.asarray(uuids, np.uint64))


def _start_dur(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and duration of slices `rows` as written (`_span`)."""
    t, e = _span(trace, rows)
    return t, e - t


def _span(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of slices `rows` as written (Perfetto's timestamps are unsigned: below 0 becomes 0)."""
    ts = np.maximum(trace.slices.ts_ns[rows], 0)
    return ts, ts + np.maximum(trace.slices.dur_ns[rows], 0)


def _nests(trace: Trace, rows: np.ndarray) -> bool:
    """Whether slices `rows` (one track's, in `slice_order`) nest (`_tracks_with_overlaps` finds no pair), checked
    a window at a time with the slices still open at the window before's last start in front: a slice that ended
    by then cannot cross a later one."""
    t0 = e0 = np.zeros(0, np.int64)
    for a in range(0, len(rows), windows.ROW_WINDOW):
        t, e = _span(trace, rows[a:a + windows.ROW_WINDOW])
        t, e = np.r_[t0, t], np.r_[e0, e]
        if len(_tracks_with_overlaps(t, e - t, np.zeros(len(t), np.int8))):
            return False
        keep = e > t[-1]
        t0, e0 = t[keep], e[keep]
    return True


def _lanes_of(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Lane of each of slices `rows` (one track's, in `slice_order`): `_assign_lanes` a window at a time."""
    lane = np.empty(len(rows), np.int32)
    stacks: list[list[int]] = []
    for a in range(0, len(rows), windows.ROW_WINDOW):
        t, e = _span(trace, rows[a:a + windows.ROW_WINDOW])
        lane[a:a + len(t)] = _assign_lanes(t.tolist(), e.tolist(), stacks)
    return lane
