"""Passes over a big trace's rows a window at a time (issue 35 item 1): cut into many small windows, a pass
gives what it gives in one window (the nesting's carried open slices, the evaluation scan, the whole summary)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

import neuron_prof
from bench.gen_trace import write
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.pipeline import report
from neuron_prof.analysis.sites.lines import line_table
from neuron_prof.analysis.sites.nesting import TRANSPARENT_SPANS, Nesting, nesting
from neuron_prof.analysis.sites.self_time import self_inside_parent, self_outside_backward
from neuron_prof.loaders import load
from neuron_prof.model import Trace, TraceBuilder, windows

KINETO = Path(__file__).resolve().parents[2] / "shared" / "traces" / "kineto"


def _fields(n: Nesting) -> dict[str, list[int]]:
    return {k: getattr(n, k).tolist() for k in ("rows", "depth", "parent", "parent_pos", "self_ns", "transparent")}


def _tangle(seed: int) -> Trace:
    """Three threads of randomly nested spans: children that outlive their parent by a rounding error or by a
    lot (crossing spans), spans that start together (longer first), transparent spans, rows out of time order."""
    rnd = random.Random(seed)
    b = TraceBuilder()
    spans = []
    for tid in (1, 2, 3):
        t = b.thread_track(1, tid)
        stack: list[tuple[int, int]] = []
        ts = 0
        for _ in range(300):
            while stack and (stack[-1][1] <= ts or rnd.random() < 0.3):
                stack.pop()
            end = stack[-1][1] if stack else ts + 10_000
            dur = max(1, rnd.randint(1, max(1, end - ts)) + rnd.choice((0, 0, 0, 1, 2, 500)))
            name = rnd.choice(("aten::mm", "aten::add", *TRANSPARENT_SPANS))
            spans.append((t, ts, dur, name))
            stack.append((ts, ts + dur))
            ts += rnd.choice((0, 0, 1, rnd.randint(1, 200)))
    rnd.shuffle(spans)
    for t, ts, dur, name in spans:
        b.add_slice(t, ts, dur, name)
    return b.build()


@pytest.mark.parametrize("size", [1, 2, 7, 64])
def test_nesting_in_small_windows_is_the_nesting_in_one(size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    traces = [_tangle(s) for s in (1, 2)]
    for t in traces:  # the cases the windows must carry: deep stacks, see-through spans
        n = nesting(t, np.arange(len(t.slices)))
        assert n.depth.max() > 5 and n.transparent.any() and (n.self_ns == 0).any()
    path = KINETO / "critical_path_alexnet_trace.json.gz"
    if path.exists():
        traces.append(neuron_prof.load(path))  # a stream sync past its memcpy: spans that cross
    for trace in traces:
        rows = np.arange(len(trace.slices))
        whole = _fields(nesting(trace, rows))
        monkeypatch.setattr(windows, "ROW_WINDOW", size)
        assert _fields(nesting(trace, rows)) == whole
        monkeypatch.undo()


@pytest.mark.parametrize("name", ["generated", "call_stack_backward_thread.json",
                                  "critical_path_alexnet_trace.json.gz"])
def test_summary_in_small_windows_is_the_summary(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A generated trace (an autograd thread, evaluation-free training) and real ones (a backward thread's
    ops, spans that cross)."""
    if name == "generated":
        trace = load(write(20_000, tmp_path / "t.json"))
    elif (KINETO / name).exists():
        trace = load(KINETO / name)
    else:
        pytest.skip("../shared/traces absent")

    def doc() -> str:
        return json.dumps(report(trace, context=Context(trace)).to_dict(), sort_keys=True, default=str)

    whole = doc()
    monkeypatch.setattr(windows, "ROW_WINDOW", 97)  # the analyses' passes and the model's own scans (time range,
    # rows on tracks) alike
    assert doc() == whole


@pytest.mark.parametrize("size", [1, 7])
def test_lines_self_time_in_small_windows(size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lines' self time: spans that outlive their parent (recomputed from what starts inside them) and the
    backward's time on another thread (taken from the slices it overlaps, less their children's share)."""
    for seed in (1, 2):
        trace = _tangle(seed)
        back = np.random.default_rng(seed).random(len(trace.slices)) < 0.3  # rows said to run a backward

        def self_times(trace: Trace = trace, back: np.ndarray = back) -> tuple[list[int], list[int]]:
            ctx = Context(trace)
            inside = self_inside_parent(ctx)
            return inside.tolist(), self_outside_backward(ctx, back, inside).tolist()

        whole = self_times()
        n = nesting(trace, np.arange(len(trace.slices)))
        assert whole[0] != n.self_ns.tolist() and whole[1] != whole[0]  # both rules change something here
        monkeypatch.setattr(windows, "ROW_WINDOW", size)
        assert self_times() == whole
        monkeypatch.undo()


@pytest.mark.parametrize("size", [1, 7])
def test_lines_rows_grouped_in_small_windows(size: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The lines table's host rows per line (a counting sort a window at a time): the same rows, self times and
    runs as in one window, each line's rows ascending."""
    trace = load(write(3_000, tmp_path / "t.json"))

    def grouped() -> tuple[list[int], list[int], list[int]]:
        t = line_table(trace, Context(trace))
        return t.host_rows.tolist(), t.host_self_ns.tolist(), t.host_start.tolist()

    whole = grouped()
    rows, _, start = whole
    assert len(start) > 2 and all(rows[a:z] == sorted(rows[a:z]) for a, z in zip(start, start[1:], strict=False))
    assert any(z - a > 1 for a, z in zip(start, start[1:], strict=False))
    monkeypatch.setattr(windows, "ROW_WINDOW", size)
    assert grouped() == whole
