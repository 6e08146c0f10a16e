"""Numbers that add up (issue 23 item 6): wrappers never rank above the ops and lines they contain, shares past
100% say what overlaps, severity follows cost, and one "profiled time" everywhere."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from neuron_prof.analysis import COST_WARNING_SHARE, Finding, Report, fmt_ns, op_table, report
from neuron_prof.analysis.overlap import share_overlaps
from neuron_prof.exporters.summary import summary_markdown, summary_text
from neuron_prof.model import KinetoCat, Meta, ProcessKind, Trace, TraceBuilder

MS = 1_000_000
T0 = 1_700_000_000_000_000_000


def wrapped_trace() -> Trace:
    """Shapes of a neuron-prof capture on the emulated device (issue 23): the main thread's
    `<built-in method run_backward ...>` waits while the autograd thread runs the backward ops; a
    `torch/_compile.py(42): inner` frame whose inner library frames the capture dropped; a background
    thread's `threading.py(982): run` spanning the whole run with nothing recorded inside; a Dynamo phase
    `bytecode_tracing (dynamo_timed)` (a cpu_op) holding the ops it traced; the user's line holds it all."""
    b = TraceBuilder()
    b.process(7, "python", ProcessKind.HOST)
    main = b.thread_track(7, 7, "main")
    auto = b.thread_track(7, 8, "pt_autograd_0")
    bg = b.thread_track(7, 9, "worker")
    py, op = KinetoCat.PYTHON, KinetoCat.CPU_OP
    b.add_slice(main, T0, 100 * MS, "train.py(10): <module>", py)
    b.add_slice(main, T0 + 1 * MS, 30 * MS, "<built-in method run_backward of torch._C._EngineBase object at 0x7f>", py)
    b.add_slice(auto, T0 + 2 * MS, 12 * MS, "aten::mm", op)
    b.add_slice(auto, T0 + 15 * MS, 10 * MS, "aten::threshold_backward", op)
    b.add_slice(main, T0 + 35 * MS, 25 * MS, "torch/_compile.py(42): inner", py)
    b.add_slice(main, T0 + 36 * MS, 2 * MS, "aten::add", op)
    b.add_slice(main, T0 + 62 * MS, 30 * MS, "bytecode_tracing (dynamo_timed)", op)
    b.add_slice(main, T0 + 63 * MS, 8 * MS, "aten::addmm", op)
    b.add_slice(bg, T0, 100 * MS, "threading.py(982): run", py)
    b.metadata[Meta.WALL] = [T0, T0 + 100 * MS]
    b.metadata["user_files"] = ["train.py"]
    return b.build()


WRAPPERS = ("threading.py(982): run", "torch/_compile.py(42): inner", "bytecode_tracing (dynamo_timed)")


def test_wrappers_rank_below_the_ops_and_lines_they_contain() -> None:
    t = op_table(wrapped_trace())
    names = [str(n) for n in t.name]
    wrappers = [i for i, n in enumerate(names) if n.startswith(WRAPPERS) or n.startswith("<built-in method run_backward")]
    assert len(wrappers) == 4 and all(bool(t.is_wrapper[i]) for i in wrappers)
    others = [i for i in range(len(t)) if i not in wrappers]
    assert max(others) < min(wrappers), names  # every op and the user's line first
    assert all(int(t.self_ns[i]) == 0 for i in wrappers)  # by self time too (the TUI sorts by it)
    # they keep their calls and total time
    i = names.index("threading.py(982): run")
    assert (int(t.calls[i]), int(t.total_ns[i])) == (1, 100 * MS)
    # the ops keep theirs; the user's line keeps its own Python time
    assert int(t.self_ns[names.index("aten::mm")]) == 12 * MS
    line = names.index("train.py(10): <module>")
    assert not t.is_wrapper[line] and int(t.self_ns[line]) > 0
    # a Dynamo phase is no op for summary's top ops
    top = [o["name"] for o in report(wrapped_trace()).totals["top_ops"]]
    assert "bytecode_tracing (dynamo_timed)" not in top and top[0] == "aten::mm"


def _f(kind: str, share: float, rows: list[int], wall: int) -> Finding:
    return Finding(kind, "warning", f"{kind} title", int(share * wall), share, len(rows), evidence={"rows": rows})


def test_shares_past_100_percent_say_what_overlaps() -> None:
    trace = wrapped_trace()
    wall = 100 * MS
    # two findings counting the same slices (as shape_churn re-counts compiles) and one spread over the others
    fs = [_f("first_call_compile", 0.62, [2, 3], wall), _f("shape_churn", 0.40, [3], wall),
          Finding("profiler_overhead", "info", "overhead", 5 * MS, 0.05, 1)]
    sh = share_overlaps(trace, fs)
    assert sh["sum"] == pytest.approx(1.07)
    (o,) = sh["overlaps"]
    assert o["findings"] == [1, 2] and o["kinds"] == ["first_call_compile", "shape_churn"]
    assert o["shared_events"] == 1 and o["shared_ns"] == int(trace.slices.dur_ns[3])
    assert sh["spread"] == [3]
    assert sh["note"].startswith("Shares add up to 107.0% of the wall time because findings overlap: #1 "
                                 "first_call_compile and #2 shape_churn count the same 1 events")
    assert "#3 profiler_overhead is time inside the others" in sh["note"]
    totals = {**report(trace).totals, "shares": sh}
    text = summary_text(Report(totals, fs))
    assert "Shares add up to 107.0%" in text
    assert "Shares add up to 107.0%" in summary_markdown(Report(totals, fs))
    # under 100%: no note, the overlaps are still in the JSON
    fs[1] = _f("shape_churn", 0.10, [3], wall)
    assert share_overlaps(trace, fs)["note"] is None and share_overlaps(trace, fs)["overlaps"]


def test_severity_follows_cost() -> None:
    """However an analysis rates a finding, one costing COST_WARNING_SHARE of the wall time is a warning."""
    f = Finding("device_idle", "info", "idle", 30 * MS, 0.30, 1)
    assert f.cost_floored().severity == "warning"
    assert Finding("device_idle", "info", "idle", 20 * MS, 0.20, 1).cost_floored().severity == "info"
    assert Finding("cpu_fallback", "critical", "x", 30 * MS, 0.30, 1).cost_floored().severity == "critical"
    from tests._workload import Workload

    for f in report(Workload(True).build()).findings:
        assert f.share < COST_WARNING_SHARE or f.severity != "info", f


def test_demo_says_one_profiled_time(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's header and the summary below it give the same profiled time (the trace's wall time); the
    run's own length, profiler start and trace writing included, is said as such."""
    from neuron_prof.demo._train import DemoResult
    from neuron_prof.demo.summary import print_summary
    from tests._workload import Workload

    trace = Workload(True).build()
    out = io.StringIO()
    print_summary(DemoResult(trace=trace, paths=[], device="cpu", steps=8, wall_s=33.0), out=out, color=False)
    text = out.getvalue()
    wall = fmt_ns(report(trace).totals["wall_ns"])
    head = text.splitlines()[0]
    assert f"{wall} profiled (33.00 s in all, with starting the profiler and writing the trace)" in head, head
    assert f"Wall time {wall}" in text
    assert "33.00 s profiled" not in text


def test_json_has_the_shares(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    from neuron_prof.cli import main
    from neuron_prof.exporters import write_trace

    p = write_trace(wrapped_trace(), tmp_path / "w.json")
    assert main(["summary", str(p), "--json"]) == 0
    sh = json.loads(capsys.readouterr().out)["totals"]["shares"]
    assert set(sh) == {"sum", "overlaps", "spread", "note"} and np.isfinite(sh["sum"])
