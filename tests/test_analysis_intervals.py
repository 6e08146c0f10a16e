"""Interval unions/intersections and slice nesting, checked against brute force on random cases."""

from __future__ import annotations

import random

import numpy as np
import pytest

from neuron_prof.analysis.intervals import intersect_ns, merge, union_ns
from neuron_prof.analysis.sites.nesting import nesting
from neuron_prof.model import TraceBuilder


@pytest.mark.parametrize("seed", range(3))
def test_union_and_intersection(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(400):
        a = [(rng.randint(0, 100), rng.randint(0, 20)) for _ in range(rng.randint(0, 8))]
        ts = np.array([s for s, _ in a], dtype=np.int64)
        dur = np.array([d for _, d in a], dtype=np.int64)
        cover = {x for s, d in a for x in range(s, s + d)}
        assert union_ns(ts, dur) == len(cover)
        s, e = merge(ts, dur)
        assert (np.diff(s) > 0).all() and (s[1:] > e[:-1]).all() if len(s) > 1 else True
        w = sorted(rng.sample(range(0, 130), 6))
        lo, hi = np.array(w[0::2]), np.array(w[1::2])
        assert intersect_ns(ts, dur, lo, hi) == sum(
            1 for x in cover if any(a <= x < b for a, b in zip(lo, hi, strict=True))
        )


def _random_tree(rng: random.Random, lo: int, hi: int, depth: int, out: list[tuple[int, int]]) -> None:
    """Properly nested spans inside [lo, hi): children never overlap each other."""
    t = lo
    while t < hi and depth < 5:
        start = rng.randint(t, hi)
        end = rng.randint(start, hi)
        if rng.random() < 0.2:
            end = start  # zero-length spans happen
        out.append((start, end - start))
        if end > start:
            _random_tree(rng, start, end, depth + 1, out)
        t = end + rng.randint(0, 3)
        if rng.random() < 0.3:
            break


@pytest.mark.parametrize("by_start", [False, True])
@pytest.mark.parametrize("seed", range(40))
def test_nesting_against_brute_force(seed: int, by_start: bool) -> None:
    rng = random.Random(seed)
    b = TraceBuilder()
    spans: list[tuple[int, int, int]] = []
    for tid in (1, 2):
        tr = b.thread_track(1, tid)
        out: list[tuple[int, int]] = []
        _random_tree(rng, 0, 1000, 0, out)
        for s, d in out:
            spans.append((tr, s, d))
    rng.shuffle(spans)  # table order is not time order
    if by_start:  # or it is, except spans that start together (in any order): a loader's usual order
        spans.sort(key=lambda x: (x[0], x[1]))
    for tr, s, d in spans:
        b.add_slice(tr, s, d, "x")
    trace = b.build()
    n = nesting(trace, np.arange(len(spans)))
    for i, (tr, s, d) in enumerate(spans):
        # the parent: the shortest other span on the track containing this one; ties by the nesting order
        # (start, then longer first) -- a zero-length span at a parent's start sorts after the parent, and
        # a zero-length span contains nothing
        cands = [
            j
            for j, (t2, s2, d2) in enumerate(spans)
            if j != i and t2 == tr and s2 <= s and s + d <= s2 + d2 and (s2, -d2, j) < (s, -d, i) and d2 > 0
        ]
        # a zero-length span at another's end is not inside it
        cands = [j for j in cands if not (spans[j][1] + spans[j][2] == s and spans[j][2] > 0)]
        # identical spans nest in table order: the later one is inside the earlier
        want = min(cands, key=lambda j: (spans[j][2], -spans[j][1], -j)) if cands else -1
        assert n.parent[i] == want, (i, spans[i], want, n.parent[i])
    kids: dict[int, int] = {}
    for i, p in enumerate(n.parent):
        if p >= 0:
            kids[int(p)] = kids.get(int(p), 0) + spans[i][2]
    assert n.self_ns.tolist() == [d - kids.get(i, 0) for i, (_, _, d) in enumerate(spans)]


@pytest.mark.parametrize("seed", range(60))
def test_analyses_survive_odd_data(seed: int) -> None:
    """Negative and zero durations, overlapping spans, args of the wrong type: no analysis fails."""
    from neuron_prof.analysis import analyze, report
    from neuron_prof.model import Arg, Meta, ProcessKind, TrackKind

    rng = random.Random(seed)
    b = TraceBuilder()
    host = b.process(1, "h")
    dev = b.process("d", "d", ProcessKind.DEVICE)
    tracks = [b.thread_track(1, 1), b.thread_track(1, 2), b.track(dev, "q", TrackKind.DEVICE)]
    tracks += [
        b.track(host, k, k)
        for k in (TrackKind.COMPILE, TrackKind.FALLBACK, TrackKind.SYNC, TrackKind.COLLECTIVE)
    ]
    mem = b.track(dev, "mem", TrackKind.MEMORY)
    junk: list[object] = [
        None,
        "x",
        -1,
        3.5,
        [1, [2]],
        {"a": 1},
        "0/x",
        "tensor 'x' size mismatch at index q",
    ]
    for _ in range(300):
        t = rng.choice(tracks)
        args = {
            k: rng.choice(junk)
            for k in rng.sample(
                [
                    Arg.CALL_SITE,
                    Arg.CACHE,
                    Arg.COMPILE_ID,
                    Arg.SIGNATURE,
                    Arg.SHAPES,
                    Arg.RECOMPILE_REASON,
                    Arg.BYTES_IN,
                    "Input Dims",
                    "Call stack",
                    Arg.COPY_BYTES,
                ],
                4,
            )
        }
        b.add_slice(
            t,
            rng.randint(0, 10_000),
            rng.randint(-50, 500),
            rng.choice(["a", "b", "ProfilerStep#1"]),
            rng.choice(["cpu_op", "kernel", ""]),
            args,
        )
    for _ in range(50):
        b.add_counter(mem, rng.randint(0, 10_000), rng.uniform(-1, 1e9))
        b.add_instant(
            tracks[0], rng.randint(0, 10_000), "[memory]", "", {"Total Allocated": rng.choice(junk)}
        )
    b.metadata[Meta.STEPS] = rng.choice([[[0, 0, 5000], [1, 5000, 10_000]], "bad", [[1]], None])
    b.metadata[Meta.PROBE_ERRORS] = rng.choice([[{"probe": "x", "error": "y"}], "bad", None])
    b.metadata[Meta.OVERHEAD_NS] = rng.choice([None, "x", 100])
    trace = b.build()
    broken = [f.title for f in analyze(trace) if str(f.evidence.get("probe", "")).startswith("analysis:")]
    assert broken == []
    report(trace)


def test_python_subclass_spans_give_their_self_time_to_the_enclosing_op() -> None:
    from neuron_prof.analysis.sites.nesting import nesting
    from neuron_prof.model import TraceBuilder

    b = TraceBuilder()
    t = b.thread_track(1, 1)
    op = b.add_slice(t, 0, 100, "aten::mm", "cpu_op")
    ps = b.add_slice(t, 10, 80, "PythonSubclass", "cpu_op")
    inner = b.add_slice(t, 20, 30, "aten::add", "cpu_op")  # another op the subclass ran
    tr = b.build()
    n = nesting(tr, np.array([op, ps, inner]))
    # aten::mm 100 - 80 (child) + 50 (PythonSubclass's own) = 70; PythonSubclass 0; aten::add 30
    assert n.self_ns.tolist() == [70, 0, 30]


@pytest.mark.parametrize("seed", range(4))
def test_a_union_merged_window_by_window_is_the_union(seed: int) -> None:
    """`merge_windows`: each window's union first, then theirs, gives exactly `merge` of every interval, whatever
    the cut, nested and touching intervals included; windows with intervals that end before they start are kept
    as they are (merged first, they would not give `merge`'s blocks)."""
    from neuron_prof.analysis.intervals import merge_windows

    rng = np.random.default_rng(seed)
    for _ in range(400):
        n = int(rng.integers(1, 40))
        ts = rng.integers(0, 30, n)
        dur = rng.integers(-15 if seed % 2 else 0, 15, n)  # odd seeds: a third end before they start
        cuts = np.sort(rng.choice(np.arange(1, n), size=min(n - 1, int(rng.integers(0, 8))), replace=False))
        got = merge_windows((ts[p], dur[p]) for p in np.split(np.arange(n), cuts))
        assert [a.tolist() for a in got] == [a.tolist() for a in merge(ts, dur)]
    assert [a.tolist() for a in merge_windows([])] == [[], []]
