"""The timeline's table built a window of rows at a time (issue 35 item 2): cut into tiny windows, the lanes, their
flow arrivals and the nesting depth they come from are what one window gives, and what the lanes are by definition
(each track's slices at one depth, by start)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import neuron_prof
from neuron_prof.analysis import nesting
from neuron_prof.model import ProcessKind, Trace, TraceBuilder, TrackKind, windows
from neuron_prof.tui._data import prepare
from neuron_prof.tui._lanes import Lane, build_lanes
from tests._demo_trace import demo_like_trace

KINETO = Path(__file__).resolve().parents[2] / "shared" / "traces" / "kineto"


def _launches() -> Trace:
    """Host ops two deep launching kernels on two device queues, one launch in three without a flow, rows out of
    time order on the device."""
    b = TraceBuilder()
    b.process(1, name="host")
    main = b.thread_track(1, 1, "MainThread")
    dev = b.process("neuron0", name="neuron:0", kind=ProcessKind.DEVICE)
    queues = [b.track(dev, f"queue {q}", TrackKind.DEVICE) for q in range(2)]
    launches = []
    for i in range(40):
        t = 1_000 * i
        b.add_slice(main, t, 900, "step_part")
        op = b.add_slice(main, t + 100, 500, "aten::mm")
        launches.append((op, queues[i % 2], t + 300 + 7 * (i % 5)))
    for op, q, t in reversed(launches):
        k = b.add_slice(q, t, 400, "kernel")
        if op % 3:
            b.add_flow(op, k)
    return b.build()


@pytest.fixture(scope="module")
def traces() -> list[Trace]:
    out = [demo_like_trace(), _launches()]
    path = KINETO / "critical_path_alexnet_trace.json.gz"  # GPU kernels with flows from their launches
    if path.exists():
        out.append(neuron_prof.load(path))
    return out


def _fields(lanes: list[Lane]) -> list[dict[str, object]]:
    return [{"label": x.label, "track": x.track, "depth": x.depth, "starts": x.starts.tolist(),
             "ends": x.ends.tolist(), "rows": x.rows.tolist(), "cum": x.cum.tolist(),
             "values": None if x.values is None else x.values.tolist(), "ends_sorted": x.ends_sorted.tolist(),
             "flows": None if x.flow_starts is None else x.flow_starts.tolist()} for x in lanes]


def _lanes(trace: Trace) -> tuple[np.ndarray, list[Lane]]:
    depth = np.asarray(prepare([trace]).rank.depth)
    return depth, build_lanes(trace, depth, int(trace.time_range()[0]))


@pytest.mark.parametrize("size", [1, 3, 64])
def test_lanes_in_small_windows_are_the_lanes_in_one(size: int, traces: list[Trace],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for trace in traces:
        depth, lanes = _lanes(trace)
        whole = _fields(lanes)
        monkeypatch.setattr(windows, "ROW_WINDOW", size)
        small_depth, small = _lanes(trace)
        assert small_depth.tolist() == depth.tolist()
        assert _fields(small) == whole
        monkeypatch.undo()


def test_lanes_are_each_depth_of_a_track_by_start(traces: list[Trace], monkeypatch: pytest.MonkeyPatch) -> None:
    """Built in windows of 5 rows, each slice lane is its track's slices at its depth in start order (stable), its
    busy time summed, and a device lane's flow arrivals the starts of the slices a flow points at."""
    monkeypatch.setattr(windows, "ROW_WINDOW", 5)
    partly = []
    for trace in traces:
        depth, lanes = _lanes(trace)
        s = trace.slices
        origin = int(trace.time_range()[0])
        dst = set(trace.flows.dst.tolist())
        slice_lanes = [x for x in lanes if not x.is_counter]
        assert slice_lanes and any(x.depth > 0 for x in slice_lanes)
        for x in slice_lanes:
            rows = np.flatnonzero((s.track == x.track) & (depth == x.depth))
            rows = rows[np.argsort(s.ts_ns[rows], kind="stable")]
            assert x.rows.tolist() == rows.tolist()
            assert x.starts.tolist() == (s.ts_ns[rows] - origin).tolist()
            assert x.cum[-1] == int(np.maximum(s.dur_ns[rows], 0).sum())
            if x.kind == TrackKind.DEVICE:
                assert x.flow_starts is not None
                assert x.flow_starts.tolist() == [int(s.ts_ns[r]) - origin for r in rows if int(r) in dst]
        arrived = sum(len(x.flow_starts) for x in slice_lanes if x.flow_starts is not None)
        partly.append(0 < arrived < sum(len(x.rows) for x in slice_lanes if x.kind == TrackKind.DEVICE))
    assert any(partly)  # a trace where flows arrive at some slices of the device lanes, not all


@pytest.mark.parametrize("size", [2, 1 << 20])
def test_the_depth_is_the_nesting_of_every_row(size: int, traces: list[Trace],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The timeline's depth (host threads' from the analyses' host nesting, the other tracks' nested apart) is
    `nesting` over every row, counted from 0, on traces with host threads and other tracks both."""
    monkeypatch.setattr(windows, "ROW_WINDOW", size)
    for trace in traces:
        n = len(trace.slices)
        want = nesting(trace, np.arange(n)).depth - 1
        host = np.isin(trace.slices.track, trace.track_ids(TrackKind.THREAD))
        assert host.any() and not host.all()
        assert np.asarray(prepare([trace]).rank.depth).tolist() == want.tolist()
