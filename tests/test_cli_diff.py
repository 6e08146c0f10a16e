"""`neuron-prof diff`: step time, ops, finding kinds, fallbacks and compiles that appeared or disappeared."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from neuron_prof.analysis.compare import diff
from neuron_prof.cli import main
from neuron_prof.exporters import write_trace
from neuron_prof.model import Trace
from tests._workload import MS, N_STEPS, STEP, Workload


def slower() -> Trace:
    """The problem workload with every steady step 2 ms longer (a slower run)."""
    import tests._workload as ta

    old = ta.STEP
    ta.STEP = STEP + 2 * MS
    try:
        return Workload(True).build()
    finally:
        ta.STEP = old


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("diff")
    return {
        "problem": write_trace(Workload(True).build(), d / "problem.pftrace"),
        "clean": write_trace(Workload(False).build(), d / "clean.pftrace"),
        "slower": write_trace(slower(), d / "slower.pftrace"),
    }


def test_fix_removes_fallbacks_and_compiles() -> None:
    d = diff(Workload(True).build(), Workload(False).build())
    gone = d["fallbacks"]["disappeared"]
    assert [(g["op"], g["call_site"], g["count"]) for g in gone] == [
        ("aten::nonzero", "model.py:88", N_STEPS - 1)
    ]
    assert d["fallbacks"]["appeared"] == []
    gone_c = {g["key"] for g in d["compiles"]["disappeared"]}
    assert "aten::mm aten::mm(f32[8, 128], f32[128, 64])" in gone_c and "forward (frame 0)" in gone_c
    assert d["totals"]["fallback_ns"] == {"base": 14 * MS, "new": 0, "delta": -14 * MS, "ratio": 0.0}
    k = d["finding_kinds"]["cpu_fallback"]
    assert (k["base_findings"], k["new_findings"], k["delta_cost_ns"]) == (1, 0, -14 * MS)
    op = next(o for o in d["ops"] if o["name"] == "aten::nonzero")
    assert op["base_ns"] == 14 * MS // N_STEPS and op["new_ns"] == 0  # per step


def test_step_time_change() -> None:
    d = diff(Workload(True).build(), slower())
    assert d["step"]["base"] == STEP and d["step"]["new"] == STEP + 2 * MS
    assert d["step"]["delta"] == 2 * MS and d["step"]["ratio"] == pytest.approx(1.2)
    # nothing appeared or disappeared
    assert all(not d[k][v] for k in ("fallbacks", "compiles") for v in ("appeared", "disappeared"))


def test_cli_text_json_markdown(traces: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", str(traces["problem"]), str(traces["slower"])]) == 0
    out = capsys.readouterr().out
    assert "Steady step 10.0 ms -> 12.0 ms (+2.0 ms, +20.0%)" in out
    assert main(["diff", str(traces["problem"]), str(traces["clean"])]) == 0
    out = capsys.readouterr().out
    assert f"fallback disappeared: aten::nonzero at model.py:88 ({N_STEPS - 1}x, 14.0 ms)" in out
    assert "Findings per kind" in out
    # the ops heading says what its ms and µs are, not "ns per step"; no line names its site twice
    assert "Ops, largest changes (self time per step)" in out and "ns per step" not in out
    assert not any(ln.count("model.py:88") > 1 for ln in out.splitlines()), out
    assert main(["diff", str(traces["problem"]), str(traces["clean"]), "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["schema"] == "neuron-prof.diff" and doc["fallbacks"]["disappeared"][0]["op"] == "aten::nonzero"
    assert main(["diff", str(traces["problem"]), str(traces["clean"]), "--markdown"]) == 0
    md = capsys.readouterr().out
    assert md.startswith("## neuron-prof diff") and "| cpu_fallback |" in md
    assert main(["diff", str(traces["problem"]), "/nonexistent.json"]) == 2
    capsys.readouterr()


def test_subprocess_smoke(traces: dict[str, Path]) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "neuron_prof", "diff", str(traces["clean"]), str(traces["problem"])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "fallback appeared: aten::nonzero at model.py:88" in p.stdout


def test_long_lists_say_how_many_more() -> None:
    from neuron_prof.exporters.diff_text import LIST_MAX, diff_text

    # GIVEN 39 compiles that disappeared (the shape of analysis.compare.diff's output)
    gone = [{"key": f"aten::mm [{i}, 64]", "name": "aten::mm", "kind": "eager", "count": 1, "ns": 2 * MS,
             "call_site": "train.py:0"} for i in range(39)]
    d = diff(Workload(True).build(), Workload(True).build())
    d["compiles"]["disappeared"] = gone
    out = diff_text(d)
    listed = [ln for ln in out.splitlines() if ln.strip().startswith("compile disappeared: aten::mm [")]
    # THEN 20 are listed, a line counts the other 19, and each names its site once
    assert len(listed) == LIST_MAX == 20
    assert "compile disappeared: ... and 19 more (--json lists them all)" in out
    assert all(ln.count("train.py:0") == 1 for ln in listed), listed


def _slower_clean() -> Trace:
    """The clean workload (a warm compile cache, no fallback) with every steady step 0.5 ms longer."""
    import tests._workload as ta

    old = ta.STEP
    ta.STEP = STEP + MS // 2
    try:
        return Workload(False).build()
    finally:
        ta.STEP = old


def test_headline_is_the_largest_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A fix that removed 60 ms of compiles and made each steady step 5% slower headlines the compiles; a
    slower run with the same compiles headlines its steps."""
    base, new = Workload(True).build(), _slower_clean()
    d = diff(base, new)
    h = d["headline"]
    assert h["key"] == "compile_ns" and h["delta"] == d["totals"]["compile_ns"]["delta"] < -50 * MS, h
    steady = 2  # the problem workload's steady steps, 1 and 7: steps 2..6 recompile (analysis.steps.phases)
    assert d["step"]["delta"] == MS // 2 and abs(h["delta"]) > steady * MS // 2
    a, b = write_trace(base, tmp_path / "a.pftrace"), write_trace(new, tmp_path / "b.pftrace")
    assert main(["diff", str(a), str(b)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("Largest change: compile time -") and lines[2].startswith("Steady step"), lines[:3]
    h = diff(Workload(True).build(), slower())["headline"]
    assert h["key"] == "steady_step_ns" and h["delta"] == 2 * MS * steady, h
    assert diff(base, base)["headline"] is None
