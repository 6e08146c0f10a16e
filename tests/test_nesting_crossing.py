"""Nesting where spans are not properly nested (issue 23): Kineto's µs timestamps rounded to ns make touching
siblings overlap by a nanosecond, and a torch.profiler trace's spans cross (``ProfilerStep#0`` opens before the
Python frame of the training function that holds the later steps). A span never hangs from one it outlives."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import neuron_prof
from neuron_prof.analysis.sites.nesting import ROUNDING_NS, nesting
from neuron_prof.model import TraceBuilder
from neuron_prof.model.order import start_order


def test_siblings_overlapping_by_rounding_are_siblings() -> None:
    b = TraceBuilder()
    t = b.thread_track(1, 1)
    spans = [(0, 100_000), (10_000, 5_001), (15_000, 1_000), (16_000, 999), (30_000, 50_000),
             (40_000, 40_001)]  # a child that outlives its parent by 1 ns: rounding, still its child
    for s, d in spans:
        b.add_slice(t, s, d, "x")
    n = nesting(b.build(), np.arange(len(spans)))
    assert n.parent.tolist() == [-1, 0, 0, 0, 0, 4]
    assert n.depth.tolist() == [1, 2, 2, 2, 2, 3]


def _no_span_outlives_its_parent(trace: neuron_prof.Trace) -> list[str]:
    n = nesting(trace, np.arange(len(trace.slices)))
    ts, end = trace.slices.ts_ns, trace.slices.ts_ns + trace.slices.dur_ns
    p = np.maximum(n.parent, 0)
    bad = np.flatnonzero((n.parent >= 0) & ((end > end[p] + ROUNDING_NS) | (ts < ts[p])))
    return [f"{trace.s(int(trace.slices.name[i]))} in {trace.s(int(trace.slices.name[p[i]]))}" for i in bad[:5]]


@pytest.mark.parametrize("name", ["critical_path_alexnet_trace.json.gz",
                                  "mtia_inference_trace_mtia_inference_rank_0.json.gz"])
def test_real_kineto_traces_with_crossing_spans(name: str) -> None:
    """Spans that partly overlap on one track (a stream sync past its memcpy; MTIA remote calls)."""
    path = Path(__file__).resolve().parents[2] / "shared" / "traces" / "kineto" / name
    if not path.exists():
        pytest.skip("../shared/traces absent")
    assert _no_span_outlives_its_parent(neuron_prof.load(path)) == []


def test_profiler_steps_of_a_real_capture_are_siblings(tmp_path: Path) -> None:
    """The demo's shape: the profiler starts (opening ProfilerStep#0) before the training function runs the
    steps; ProfilerStep#1.. hang from the training function's frame, never from ProfilerStep#0."""
    import torch

    def train(prof: torch.profiler.profile, w: torch.Tensor) -> None:
        for _ in range(3):
            (w @ w).sum()
            prof.step()

    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True,
                                  schedule=torch.profiler.schedule(wait=0, warmup=0, active=10))
    prof.start()
    train(prof, torch.randn(16, 16))
    prof.stop()
    out = tmp_path / "t.json"
    prof.export_chrome_trace(str(out))
    trace = neuron_prof.load(out)
    rows = np.arange(len(trace.slices))
    n = nesting(trace, rows)
    name = {int(r): trace.s(int(trace.slices.name[r])) for r in rows}
    steps = [int(r) for r in rows if name[int(r)].startswith("ProfilerStep#")]
    assert len(steps) >= 3
    parents = {name[r]: name.get(int(n.parent[r]), "") for r in steps}
    assert not any(p.startswith("ProfilerStep#") for p in parents.values()), parents
    # the steps train() opens and closes hang from its frame (the last one is closed by stop(), outside it)
    assert parents["ProfilerStep#1"].endswith(": train") and parents["ProfilerStep#2"].endswith(": train"), parents
    assert _no_span_outlives_its_parent(trace) == []


def test_start_order_is_lexsorts_order() -> None:
    """`start_order` (stable sorts, then the slices that start together longer first) is exactly
    ``np.lexsort((-dur, ts, track))``: ties of start, of start and duration, several tracks, unsorted input,
    negative durations."""
    rng = np.random.default_rng(7)
    for i in range(200):
        n = (0, 1, 2)[i] if i < 3 else int(rng.integers(0, 300))
        ts = rng.integers(0, int(rng.integers(1, 40)), n).astype(np.int64) * 1000
        dur = rng.integers(-2, 4, n).astype(np.int64)
        track = rng.integers(0, 3, n).astype(np.int32)
        assert np.array_equal(start_order(ts, dur, track), np.lexsort((-dur, ts, track)))


def test_parent_is_the_nearest_earlier_slice_that_holds_it() -> None:
    """Each slice's parent is the nearest one before it (in start order, same track) that holds it, found here
    by a scan back per slice: runs of top-level siblings (whose walk is cut short), nesting, rounding overlaps,
    several tracks, negative and zero times."""
    rng = np.random.default_rng(11)
    for _ in range(300):
        n = int(rng.integers(1, 80))
        unit = int(rng.choice([1, 1000]))
        ts = rng.integers(-20, 60, n).astype(np.int64) * unit
        dur = rng.integers(0, 30, n).astype(np.int64) * int(rng.choice([1, unit]))
        track = rng.integers(0, 3, n).astype(np.int32)
        b = TraceBuilder()
        tracks = [b.thread_track(1, k + 1) for k in range(3)]
        for s, d, k in zip(ts.tolist(), dur.tolist(), track.tolist(), strict=True):
            b.add_slice(tracks[k], s, d, "x")
        tr = b.build()
        got = nesting(tr, np.arange(n)).parent
        sl = tr.slices
        o = start_order(sl.ts_ns, sl.dur_ns, sl.track)
        end = sl.ts_ns + sl.dur_ns
        want = np.full(n, -1, dtype=np.int64)
        for p, i in enumerate(o.tolist()):
            need = max(int(end[i]) - ROUNDING_NS, int(sl.ts_ns[i]) + 1)
            for j in o[:p][::-1].tolist():
                if sl.track[j] != sl.track[i]:
                    break
                if end[j] >= need:
                    want[i] = j
                    break
        assert got.tolist() == want.tolist()


def test_host_stack_at_a_time_leaves_out_a_slice_ended_by_then() -> None:
    from neuron_prof.analysis import Context
    from neuron_prof.analysis.sites.host import host_stacks_at

    b = TraceBuilder()
    t = b.thread_track(1, 1)
    for s, d, name in ((0, 100, "outer"), (10, 20, "a"), (30, 5, "b")):
        b.add_slice(t, s, d, name)
    tr = b.build()
    ctx = Context(tr)

    def names(at: int) -> list[list[str]]:
        return [[tr.slice_name(r) for r in chain] for chain in host_stacks_at(ctx, at)]

    assert names(29) == [["outer", "a"]]
    assert names(30) == [["outer", "b"]]
    assert names(35) == [["outer"]]  # b ends at 35: done
    assert names(100) == []


def test_row_numbers_are_int32_under_2_31_rows_and_int64_above() -> None:
    """`row_dtype` chooses int32 for row numbers of a table up to ROWS_INT32 rows and int64 beyond it."""
    from neuron_prof.model.order import ROWS_INT32, row_dtype

    assert ROWS_INT32 == 2**31 - 1
    assert row_dtype(0) is np.int32 and row_dtype(ROWS_INT32) is np.int32
    assert row_dtype(ROWS_INT32 + 1) is np.int64 and row_dtype(2**40) is np.int64


def test_nesting_and_host_stacks_are_the_same_in_int64(monkeypatch: pytest.MonkeyPatch) -> None:
    """A trace over the int32 limit (the limit lowered here, not a 2^31-row trace) nests in int64, with the same
    parents, depths, positions and self times, and the same host stacks."""
    from neuron_prof.analysis import Context
    from neuron_prof.analysis.sites.host import host_nesting, host_stacks_at
    from neuron_prof.model import TrackKind, order

    rng = np.random.default_rng(5)
    b = TraceBuilder()
    tracks = [b.thread_track(1, k + 1) for k in range(3)]
    for s, d, k in zip(rng.integers(0, 500, 400).tolist(), rng.integers(0, 80, 400).tolist(),
                       rng.integers(0, 3, 400).tolist(), strict=True):
        b.add_slice(tracks[k], s, d, "x")
    tr = b.build()
    small = host_nesting(Context(tr))
    stacks = [host_stacks_at(Context(tr), t) for t in range(0, 600, 37)]
    monkeypatch.setattr(order, "ROWS_INT32", len(tr.slices) - 1)
    big_ctx = Context(tr)
    big = host_nesting(big_ctx)
    assert small.rows.dtype == np.int32 and big.rows.dtype == np.int64
    assert big_ctx.rows(TrackKind.THREAD).dtype == np.int64
    for f in ("rows", "depth", "parent", "parent_pos"):
        assert getattr(big, f).dtype == np.int64, f
        assert getattr(big, f).tolist() == getattr(small, f).tolist(), f
    assert big.self_ns.tolist() == small.self_ns.tolist()
    assert [host_stacks_at(Context(tr), t) for t in range(0, 600, 37)] == stacks
