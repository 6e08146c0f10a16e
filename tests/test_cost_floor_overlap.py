"""Severity follows cost, counted once (issue 23, item 6): the cost floor (COST_WARNING_SHARE of the wall time
is never below warning) weighs the part of a finding's cost that no finding before it counts, by the overlap
measure totals.shares uses; shape churn's compiles do not raise the first-call compile finding that counts
the same compiles."""

from __future__ import annotations

from neuron_prof.analysis import COST_WARNING_SHARE, Finding, analyze
from neuron_prof.analysis.overlap import cost_floor, share_overlaps
from neuron_prof.model import Arg, TraceBuilder, TrackKind

MS = 1_000_000


def _spans(n: int) -> tuple[TraceBuilder, int]:
    b = TraceBuilder()
    host = b.thread_track(1, 1, "main")
    for k in range(n):
        b.add_slice(host, k * 10 * MS, 10 * MS, f"aten::op{k}", "cpu_op")
    return b, host


def _f(kind: str, sev: str, share: float, rows: list[int]) -> Finding:
    return Finding(kind, sev, kind, int(share * 100 * MS), share, 1, evidence={"rows": rows})


def test_the_floor_weighs_only_time_no_finding_before_counts() -> None:
    trace = _spans(10)[0].build()  # ten 10 ms events in a 100 ms run
    owner = _f("shape_churn", "warning", 0.3, [0, 1, 2])
    same = _f("first_call_compile", "info", 0.3, [0, 1, 2])       # all of it counted by the churn
    half = _f("device_idle", "info", 0.4, [2, 3, 4, 5])          # 10 of its 40 ms counted: 30% left
    part = _f("memory_peak", "info", 0.3, [2, 3, 4])                 # 10 ms counted, 10 ms by `half`: none left
    alone = _f("sync_point", "info", 0.3, [7, 8, 9])
    no_rows = Finding("profiler_overhead", "info", "o", 30 * MS, 0.3, 1)
    got = {f.kind: f.severity for f in cost_floor(trace, [same, half, part, owner, alone, no_rows])}
    assert got == {"first_call_compile": "info", "device_idle": "warning", "memory_peak": "info",
                   "shape_churn": "warning", "sync_point": "warning", "profiler_overhead": "warning"}
    # the same overlap totals.shares reports
    sh = share_overlaps(trace, [owner, same])
    assert sh["overlaps"][0]["shared_ns"] == 30 * MS


STEP0, STEP = 300 * MS, 100 * MS


def _churn_trace():
    """A long warm-up step and 7 steps of 100 ms; 20 ops compile in warm-up (200 ms, a cold cache) and
    `aten::mm` at train.py:10 compiles a new batch size every step (8 x 10 ms): 28% of the wall time in all,
    the churn's 8% of it counted by shape_churn."""
    b = TraceBuilder()
    p = b.process(1, "python")
    host = b.thread_track(1, 1, "main")
    comp = b.track(p, "compile", TrackKind.COMPILE)
    starts = [0] + [STEP0 + k * STEP for k in range(7)]
    for k, t in enumerate(starts):
        b.add_slice(host, t, (STEP0 if k == 0 else STEP) - MS, f"ProfilerStep#{k}", "user_annotation")

    def compile_at(t: int, op: str, shapes: list[list[int]], site: str) -> None:
        b.add_slice(host, t, 11 * MS, op, "cpu_op", {"Input Dims": shapes})
        b.add_slice(comp, t, 10 * MS, op, "neuron_prof.compile",
                    {Arg.COMPILE_KIND: "eager", Arg.SIGNATURE: f"{op}_{shapes}", Arg.SHAPES: shapes,
                     Arg.CALL_SITE: site})

    for i in range(20):
        compile_at(MS + i * 12 * MS, f"aten::op{i}", [[4, 4]], f"train.py:{20 + i}")
    for k, t in enumerate(starts):
        compile_at(t + (250 if k == 0 else 50) * MS, "aten::mm", [[8 + 4 * k, 16], [16, 4]], "train.py:10")
    return b.build()


def test_first_call_compiles_counted_by_shape_churn_are_not_raised_by_the_floor() -> None:
    found = analyze(_churn_trace())
    [churn] = [f for f in found if f.kind == "shape_churn"]
    [fc] = [f for f in found if f.kind == "first_call_compile"]
    assert churn.severity in ("warning", "critical") and churn.call_site == "train.py:10"
    assert fc.share >= COST_WARNING_SHARE, fc.share  # 280 ms of compiles, 80 ms of them the churn's
    assert fc.severity == "info", (fc.severity, fc.title)
