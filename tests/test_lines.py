"""The lines view (issue 23, item 1) and the per-step breakdown (item 7): `summary --json` `lines` and
`step_breakdown`, the summary text, on a Kineto-shaped trace with known numbers and on a real capture."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import neuron_prof
from neuron_prof.analysis import Context, report
from neuron_prof.analysis.sites.lines import line_table
from neuron_prof.cli import main
from tests._builders import KINETO_BASE

NEURON_PROF = str(Path(sys.executable).with_name("neuron-prof"))
US = 1000


def _known_trace(tmp_path: Path) -> Path:
    """A step of a forward op at train.py:10 (100 µs, launching 30 µs of device work), loss.backward() at
    line 20 whose autograd thread runs that op's backward (50 µs, linked by a fwdbwd flow) while the main
    thread waits in run_backward, and one more op at line 12 (40 µs)."""
    stack10 = "train.py(10): forward;train.py(30): <module>"
    stack12 = "train.py(12): forward;train.py(30): <module>"
    stack20 = "train.py(20): <module>"
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0,
         "dur": 1000},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100, "dur": 100,
         "args": {"Call stack": stack10, "Sequence number": 7, "Fwd thread id": 0}},
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 250, "dur": 40,
         "args": {"Call stack": stack12}},
        {"ph": "X", "cat": "python_function", "name": "<built-in method run_backward of object>", "pid": 1,
         "tid": 1, "ts": 400, "dur": 200, "args": {"call_site": "train.py:20"}},
        {"ph": "X", "cat": "cpu_op", "name": "autograd::engine::evaluate_function: MmBackward0", "pid": 1,
         "tid": 2, "ts": 450, "dur": 50, "args": {"Call stack": stack20, "Sequence number": 7,
                                                  "Fwd thread id": 1}},
        {"ph": "X", "cat": "cpu_op", "name": "MmBackward0", "pid": 1, "tid": 2, "ts": 451, "dur": 48,
         "args": {"Sequence number": 7, "Fwd thread id": 1}},
        {"ph": "s", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 1, "ts": 100},
        {"ph": "f", "cat": "fwdbwd", "name": "fwdbwd", "id": 1, "pid": 1, "tid": 2, "ts": 450, "bp": "e"},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 150, "dur": 30,
         "args": {"correlation": 5}},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 1, "tid": 1, "ts": 120},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 0, "tid": 7, "ts": 150, "bp": "e"},
    ]
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": KINETO_BASE, "traceEvents": ev,
           "neuron_prof": {"format_version": 1,
                           "metadata": {"stack_lines": "exact", "user_files": ["train.py"]}}}
    (tmp_path / "train.py").write_text("\n".join(f"line_{i} = {i}" for i in range(1, 41)) + "\n")
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    return p


def test_lines_charge_backward_to_the_forward_line_with_known_numbers(tmp_path: Path) -> None:
    trace = neuron_prof.load(_known_trace(tmp_path))
    rep = report(trace)
    by = {d["call_site"]: d for d in rep.lines}
    ten = by["train.py:10"]
    assert ten["host_ns"] == (100 + 50) * US  # the forward op and its backward, both on line 10
    assert ten["host_backward_ns"] == 50 * US
    assert ten["device_ns"] == 30 * US
    assert ten["backward_of"] == ["MmBackward0"]
    assert ten["source"] == "line_10 = 10"  # the file next to the trace
    assert by["train.py:12"]["host_ns"] == 40 * US
    # the backward() line keeps only its own time: 200 µs waiting, less the 50 µs its backward ran elsewhere
    assert by["train.py:20"]["host_ns"] == 150 * US
    assert rep.lines[0]["call_site"] == "train.py:10"
    t = line_table(trace, Context(trace))
    rows = {trace.slice_name(int(r)) for r in t.rows_of(0)}
    assert {"aten::mm", "MmBackward0", "autograd::engine::evaluate_function: MmBackward0"} <= rows


def test_step_breakdown_parts_add_up(tmp_path: Path) -> None:
    trace = neuron_prof.load(_known_trace(tmp_path))
    (step,) = report(trace).steps
    assert step["dur_ns"] == 1000 * US and step["device_busy_ns"] == 30 * US
    assert sum(step["parts"].values()) == step["dur_ns"]
    # host ops (mm, relu, the two backward spans) run 190 µs; the kernel ran while mm did: no device-only part
    assert step["parts"]["host"] == 190 * US and step["parts"]["device"] == 0


QR = textwrap.dedent("""\
    import torch

    lin = torch.nn.Linear(16, 8)
    x = torch.randn(32, 16)
    for step in range(3):
        h = torch.tanh(lin(x))
        q, _ = torch.linalg.qr(h)  # LINE: qr
        loss = q.sum()
        loss.backward()  # LINE: backward
    """)


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("lines")
    (d / "job.py").write_text(QR)
    out = d / "t.json"
    r = subprocess.run([NEURON_PROF, "run", "-q", "-o", str(out), str(d / "job.py")], capture_output=True,
                       text=True, timeout=300, cwd=d)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def _line(tag: str) -> int:
    return next(i for i, ln in enumerate(QR.splitlines(), 1) if f"# LINE: {tag}" in ln)


def test_summary_json_lines_on_a_real_capture(capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(capture), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    lines = {d["call_site"]: d for d in doc["lines"]}
    qr = lines[f"job.py:{_line('qr')}"]
    assert qr["source"] == "q, _ = torch.linalg.qr(h)  # LINE: qr"
    assert "LinalgQrBackward0" in qr["backward_of"] and 0 < qr["host_backward_ns"] < qr["host_ns"]
    backward = lines.get(f"job.py:{_line('backward')}", {"host_ns": 0, "backward_of": []})
    # the backward() line keeps its own work and the backward steps no forward op makes (the leaves'
    # AccumulateGrad, where DDP's hooks all-reduce): every other backward op is charged to its forward line (a
    # structural check; comparing the two lines' times depends on the machine's load)
    assert all(n.endswith("AccumulateGrad") for n in backward["backward_of"]), backward["backward_of"]
    trace = neuron_prof.load(capture)
    t = line_table(trace, Context(trace))
    at = {str(c): i for i, c in enumerate(t.call_site)}
    on_backward_line = {trace.slice_name(int(r)) for r in t.rows_of(at[f"job.py:{_line('backward')}"])} \
        if f"job.py:{_line('backward')}" in at else set()
    assert not {n for n in on_backward_line if "Backward" in n}, on_backward_line
    assert "LinalgQrBackward0" in {trace.slice_name(int(r)) for r in t.rows_of(at[f"job.py:{_line('qr')}"])}
    assert not any(d["call_site"].startswith(("threading.py", "torch/")) for d in doc["lines"])
    steps = doc["step_breakdown"]
    assert all(sum(s["parts"].values()) == s["dur_ns"] for s in steps)


def test_summary_text_shows_the_lines_with_their_source(capture: Path) -> None:
    r = subprocess.run([NEURON_PROF, "summary", str(capture)], capture_output=True, text=True, timeout=120,
                       cwd=capture.parent)
    assert r.returncode == 0, r.stderr
    text = r.stdout[r.stdout.index("Where the time goes"):]
    assert f"job.py:{_line('qr')}" in text and "q, _ = torch.linalg.qr(h)" in text
    assert "+ backward: LinalgQrBackward0" in text


def test_summary_markdown_has_the_lines_table_of_the_text(capture: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(capture)]) == 0
    text = capsys.readouterr().out
    assert main(["summary", str(capture), "--markdown"]) == 0
    md = capsys.readouterr().out
    # GIVEN the text summary's lines table, THEN the Markdown has it too: a heading, a header row, one row per
    # line with the same cells (the qr line with its source and the backward it ran)
    title = "Where the time goes, by line of your code (backward charged to its forward line)"
    assert f"### {title}" in md
    table = md[md.index(f"### {title}"):].split("\n\n")[1].splitlines()
    assert table[0].startswith("| line | host |") and table[0].endswith("| source |")
    rows = [[c.strip() for c in ln.strip("|").split(" | ")] for ln in table[2:]]
    qr = next(r for r in rows if r[0] == f"job.py:{_line('qr')}")
    assert "q, _ = torch.linalg.qr(h)" in qr[-1] and "+ backward: LinalgQrBackward0" in qr[-1]
    words = text[text.index(title):].splitlines()
    text_row = " ".join(next(ln for ln in words if ln.startswith(f"job.py:{_line('qr')} ")).split())
    assert text_row.startswith(" ".join(qr[:-1]) + " q, _ ="), (qr, text_row)


def test_lines_add_up_to_the_totals_on_kineto_traces() -> None:
    """Over every line (the no-line row included), the sync waits, fallbacks and collectives are the totals'
    (every event is charged to exactly one line), on the real Kineto traces in ../shared."""
    from neuron_prof.analysis import line_table
    from tests.conftest import kineto_traces

    paths = kineto_traces()
    if not paths:
        pytest.skip("../shared/traces/kineto absent")
    for p in paths:
        trace = neuron_prof.load(p)
        ctx = Context(trace)
        totals = report(trace, context=ctx).totals
        t = line_table(trace, ctx)
        assert int(t.cols["sync_ns"].sum()) == totals["sync_ns"], p.name
        assert int(t.cols["syncs"].sum()) == totals["sync_count"], p.name
        assert int(t.cols["fallbacks"].sum()) == totals["fallback_count"], p.name
        assert int(t.cols["collectives"].sum()) >= 0 and len(t) >= 1, p.name
        assert (t.cols["host_backward_ns"] <= t.cols["host_ns"]).all(), p.name


def test_a_frame_that_outlives_its_step_keeps_only_its_own_time(tmp_path: Path) -> None:
    """A Python frame opened inside one ProfilerStep and closed after the next (the demo's `train()`) is not
    nested in the steps: its self time is what the slices starting inside it leave, not the next steps'."""
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "python_function", "name": "train.py(3): train", "pid": 1, "tid": 1, "ts": 10,
         "dur": 290, "args": {"call_site": "train.py:40"}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 150,
         "dur": 100},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 160, "dur": 50,
         "args": {"Call stack": "train.py(5): train;train.py(40): <module>"}},
    ]
    doc = {"schemaVersion": 1, "baseTimeNanoseconds": KINETO_BASE, "traceEvents": ev,
           "neuron_prof": {"format_version": 1,
                           "metadata": {"stack_lines": "exact", "user_files": ["train.py"]}}}
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    by = {d["call_site"]: d for d in report(neuron_prof.load(p)).lines}
    assert by["train.py:40"]["host_ns"] == (290 - 100) * US  # less ProfilerStep#2 (which holds the mm)
    assert by["train.py:5"]["host_ns"] == 50 * US
