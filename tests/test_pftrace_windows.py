"""The .pftrace writer over a big trace (issue 35 item 1): slices placed one track or a window of rows at a time,
each chunk's columns and args documents read a table window / blob span at a time, whole-trace arrays in mapped
files for a trace from the column cache. With windows small enough that every boundary is crossed (tracks
scattered over the table, out of start order, lanes open across windows, flows whose ends start together), the
file is byte for byte the one written with everything in one window, and it passes the checker."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from neuron_prof.analysis import spill
from neuron_prof.exporters import _reads as reads
from neuron_prof.exporters.perfetto import write_pftrace
from neuron_prof.model import Trace, TraceBuilder, TrackKind, windows
from tests._column_folder import mapped_copy
from tests.test_pftrace_export import check

T0 = 1_790_857_026_000_000_000
BIG = 1 << 40


def _trace(n: int = 3_000, seed: int = 5) -> Trace:
    """Tracks interleaved in the table: one in start order, one shuffled with ties, one with partial overlaps (lanes
    that stay open across windows), a device track scattered thinly, a counter track with slices and instants;
    args of one template (the fast path) and of many shapes; flows, some between slices that start together."""
    rnd = random.Random(seed)
    b = TraceBuilder()
    b.process(7, "python3", rank=0)
    tracks = [b.thread_track(7, 7 + i, f"thread {i}") for i in range(3)]
    dev = b.track(b.process(0, "dev 0", kind="device"), "queue 0", TrackKind.DEVICE, tid=1)
    ctr = b.track(0, "depth", TrackKind.COUNTER)
    rows: list[int] = []
    t = [T0, T0, T0]
    for k in range(n):
        i = k % 3
        if i == 0:
            t[0] += rnd.randint(0, 3)
            ts, dur = t[0], rnd.choice([0, 1, 2, 5])
        elif i == 1:
            ts, dur = T0 + rnd.randint(0, n // 4), rnd.randint(0, 6)
        else:
            t[2] += rnd.randint(0, 4)
            ts, dur = t[2], rnd.randint(1, 40)  # long and close: partial overlaps, lanes
        args = ({"External id": k, "Input Dims": [[k % 9, 4]], "name": f"op{k % 5}", "f": k / 8} if k % 4
                else {"k": k, "s": "x" * (k % 11)} if k % 8 else None)
        rows.append(b.add_slice(tracks[i], ts, dur, f"op{k % 17}", "cpu_op", args))
        if k % 97 == 0:
            rows.append(b.add_slice(dev, T0 + k, 3, "kernel", "kernel", {"seq": k}))
        if k % 53 == 0:
            b.add_slice(ctr, T0 + k, 2, "on a counter", "")
            b.add_instant(ctr, T0 + k, "mark", "", {"k": k})
        if k % 11 == 0:
            b.add_instant(tracks[i], T0 + n - k, "inst", "cpu_instant_event", {"Bytes": k})
        if k % 7 == 0:
            b.add_counter(ctr, T0 + k, float(k % 13))
    cross = b.thread_track(7, 99, "crossing")  # its one partial overlap: the first slice and the last, windows apart
    b.add_slice(cross, T0, 1000, "outer", "")
    for i in range(20):
        b.add_slice(cross, T0 + 10 + 40 * i, 5, "inner", "")
    b.add_slice(cross, T0 + 990, 100, "crosses outer", "")
    late = b.thread_track(7, 98, "swapped")  # in start order but for one pair, across the first window's end
    for i in range(30):
        b.add_slice(late, T0 + 10 * (i + (i == 6) - (i == 7)), 3, "s", "")
    for j in range(0, len(rows) - 5, 13):
        b.add_flow(rows[j], rows[j + rnd.choice([1, 3, 4])], j, "ac2g", "ac2g")
    return b.build()


def _bytes(trace: Trace, path: Path) -> bytes:
    return write_pftrace(trace, path, chunk=97).read_bytes()


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> tuple[Trace, bytes]:
    """The trace and its file written with every window holding all rows (as before the writer was windowed)."""
    trace = _trace()
    mp = pytest.MonkeyPatch()
    mp.setattr(windows, "ROW_WINDOW", BIG)
    mp.setattr(reads, "ARGS_SPAN", BIG)
    try:
        data = _bytes(trace, tmp_path_factory.mktemp("whole") / "t.pftrace")
    finally:
        mp.undo()
    return trace, data


def test_the_trace_has_what_the_windows_must_carry(whole: tuple[Trace, bytes]) -> None:
    """Lanes (on "crossing" too), a counter track's slice lane, tracks out of start order (one pair only on
    "swapped"): otherwise the comparisons test little."""
    from neuron_prof.exporters._pftrace_layout import lanes, slice_order

    sl = whole[0].slices
    order = slice_order(sl.ts_ns, sl.dur_ns, sl.track)
    lane = lanes(sl.ts_ns, sl.dur_ns, sl.track, order)
    assert lane.max() >= 2 and not (np.diff(sl.track) >= 0).all()
    names = [t.name for t in whole[0].tracks]
    assert lane[sl.track == names.index("crossing")].max() == 1
    late = np.flatnonzero(sl.track == names.index("swapped"))
    assert (order[np.isin(order, late)] != late).sum() == 2
    assert b"on a counter" in whole[1]


@pytest.mark.parametrize(("row_window", "span"), [(7, 40), (64, 300), (1000, 1 << 12)])
def test_small_windows_write_the_same_bytes(whole: tuple[Trace, bytes], tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch, row_window: int, span: int) -> None:
    trace, want = whole
    monkeypatch.setattr(windows, "ROW_WINDOW", row_window)
    monkeypatch.setattr(reads, "ARGS_SPAN", span)
    path = tmp_path / "t.pftrace"
    assert _bytes(trace, path) == want
    check(path)


def test_from_the_column_cache_with_spilled_arrays(whole: tuple[Trace, bytes], tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace from a column folder: order, positions and flow ends in mapped files, pages let go each window."""
    trace, want = whole
    mapped = mapped_copy(trace, tmp_path / "cols")
    monkeypatch.setattr(spill, "SPILL_ROWS", 0)
    monkeypatch.setattr(spill, "SPILL_BYTES", 0)
    monkeypatch.setattr(windows, "ROW_WINDOW", 50)
    monkeypatch.setattr(reads, "ARGS_SPAN", 200)
    assert _bytes(mapped, tmp_path / "t.pftrace") == want
