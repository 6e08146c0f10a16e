"""Backward ops are charged to the forward op that created them (issue 23, item 2): real captures, a plain
torch.profiler trace, a trace without fwdbwd flows (sequence numbers alone) and Kineto's backward-thread
trace.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

import neuron_prof
from neuron_prof.analysis import Context, analyze, sites_of
from neuron_prof.model import Trace
from tests.conftest import shared_kineto
from tests.test_sites_first_pass import lazy_matches_full
from tests.userland import _fork as forked

NEURON_PROF = str(Path(sys.executable).with_name("neuron-prof"))
PROGRAM = Path(__file__).parent / "userland" / "qr_backward_fallback.py"

QR = textwrap.dedent("""\
    import torch

    class Head(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(16, 8)

        def forward(self, x):
            h = torch.tanh(self.proj(x))  # LINE: tanh
            q, _ = torch.linalg.qr(h)  # LINE: qr
            return q.sum()

    model = Head()
    x = torch.randn(32, 16)
    for step in range(3):
        loss = model(x)
        loss.backward()  # LINE: backward
    """)


def tagged(src: str) -> dict[str, int]:
    return {ln.split("# LINE:")[1].strip(): i for i, ln in enumerate(src.splitlines(), 1) if "# LINE:" in ln}


def _capture(tmp_path: Path, src: str, *opts: str) -> Trace:
    script = tmp_path / "job.py"
    script.write_text(src)
    out = tmp_path / "t.json"
    # `neuron-prof run` through main() in a process forked from one that imported torch already (the suite's time)
    r = forked.run([forked.CLI, "run", "-q", "-o", str(out), *opts, str(script)], cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return neuron_prof.load(out)


def _backward_sites(trace: Trace, name: str) -> list:
    ctx = Context(trace)
    hs = sites_of(ctx).host_sites()
    rows = hs.rows[trace.slices.name[hs.rows] == trace.strings.get(name)]
    assert len(rows), f"no {name} in the trace"
    return [sites_of(ctx).of_row(int(r)) for r in rows]


@pytest.fixture(scope="module")
def cpu_capture(tmp_path_factory: pytest.TempPathFactory) -> Trace:
    return _capture(tmp_path_factory.mktemp("qr"), QR)


def test_backward_ops_take_the_forward_line_in_a_real_capture(cpu_capture: Trace) -> None:
    lines = tagged(QR)
    for s in _backward_sites(cpu_capture, "aten::linalg_solve_triangular"):
        assert s.call_site == f"job.py:{lines['qr']}", s
        assert (s.backward, s.forward_op) == ("LinalgQrBackward0", "aten::linalg_qr")
        assert s.label() == f"job.py:{lines['qr']} (backward)"
    for s in _backward_sites(cpu_capture, "aten::tanh_backward"):
        assert s.call_site == f"job.py:{lines['tanh']}" and s.backward == "TanhBackward0", s
    # no op derived from a forward op is left at the backward() line; the nodes no forward op makes (the
    # leaves' AccumulateGrad, where DDP's hooks all-reduce) are charged to the backward() call that ran them
    ctx = Context(cpu_capture)
    hs = sites_of(ctx).host_sites()
    at_backward_line = [s for s in hs.sites if s.backward and s.call_site.endswith(f":{lines['backward']}")]
    assert at_backward_line and all(s.backward == "torch::autograd::AccumulateGrad" and not s.forward_op
                                    for s in at_backward_line), at_backward_line
    assert {s.call_site for s in _backward_sites(cpu_capture, "torch::autograd::AccumulateGrad")} == {
        f"job.py:{lines['backward']}"}


def test_backward_sites_of_a_few_rows_match_the_whole_table(cpu_capture: Trace,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The sites the first pass works out for a few rows alone (`Sites.of_rows`) are the whole table's,
    backward ops (rule 5: the forward op's site, the backward span around them) included."""
    assert lazy_matches_full(cpu_capture, monkeypatch) > 100


def test_the_sequence_number_alone_links_backward_to_forward(cpu_capture: Trace) -> None:
    """Without Kineto's fwdbwd flows (a trace whose flows were dropped), the autograd sequence numbers do."""
    fl = cpu_capture.flows
    fwdbwd = cpu_capture.strings.get("fwdbwd")
    assert fwdbwd is not None and (fl.cat == fwdbwd).sum() >= 3
    bare = cpu_capture.replace(flows=fl.take(np.flatnonzero(fl.cat != fwdbwd)))
    lines = tagged(QR)
    for s in _backward_sites(bare, "aten::linalg_solve_triangular"):
        assert (s.call_site, s.backward) == (f"job.py:{lines['qr']}", "LinalgQrBackward0"), s


def test_plain_torch_profiler_trace_names_the_forward_function(tmp_path: Path) -> None:
    """torch.profiler's own with_stack trace gives only function entry lines: the forward *function* is named,
    never the backward() call's."""

    class Head(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(16, 8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, _ = torch.linalg.qr(torch.tanh(self.proj(x)))
            return q.sum()

    model, x = Head(), torch.randn(32, 16)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_stack=True) as prof:
        for _ in range(2):
            model(x).backward()
    out = tmp_path / "plain.json"
    prof.export_chrome_trace(str(out))
    for s in _backward_sites(neuron_prof.load(out), "aten::linalg_solve_triangular"):
        assert s.backward == "LinalgQrBackward0" and s.forward_op == "aten::linalg_qr", s
        assert s.call_site == "" and s.function.endswith(" forward"), s


def test_backward_thread_trace_without_its_forward() -> None:
    """Kineto's backward-thread trace holds a backward op whose forward op is not in the trace: it is in the
    backward of AddmmBackward0, and no line is made up for it."""
    trace = neuron_prof.load(shared_kineto("call_stack_backward_thread.json"))
    (s,) = _backward_sites(trace, "aten::mm")
    assert s.backward == "AddmmBackward0" and s.forward_op == "" and s.call_site == ""
    assert "not in the trace" in s.reason
    assert s.evidence()["in_backward"] == "AddmmBackward0"


def test_fallback_in_backward_names_the_forward_line(tmp_path: Path) -> None:
    """The issue's program on the emulated device: linalg_solve_triangular falls back in LinalgQrBackward0;
    the finding names the line of torch.linalg.qr and says it happened in its backward."""
    out = tmp_path / "t.json"
    r = forked.run([forked.CLI, "run", "--emulate-neuron", "-q", "-o", str(out), str(PROGRAM)], cwd=tmp_path,
                   timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    src = PROGRAM.read_text().splitlines()
    qr_line = next(i for i, ln in enumerate(src, 1) if "torch.linalg.qr(" in ln)
    backward_line = next(i for i, ln in enumerate(src, 1) if "loss.backward()" in ln)
    trace = neuron_prof.load(out)
    found = [f for f in analyze(trace) if f.kind == "cpu_fallback"
             and f.evidence.get("op") == "aten::linalg_solve_triangular"]
    assert len(found) == 1, [f.title for f in analyze(trace)]
    f = found[0]
    assert f.call_site.endswith(f"qr_backward_fallback.py:{qr_line}"), f.call_site
    assert f.evidence["in_backward"] == "LinalgQrBackward0" and f.evidence["forward_op"] == "aten::linalg_qr"
    assert "in the backward of aten::linalg_qr" in f.title
    # the compiles of backward ops are at their forward lines too, and say they happened in the backward
    tanh_line = next(i for i, ln in enumerate(src, 1) if "torch.tanh(" in ln)
    (compiles,) = [g for g in analyze(trace) if g.kind == "first_call_compile"]
    tanh_bwd = [s for s in compiles.evidence["sites"] if s["op"] == "aten::tanh_backward"]
    assert tanh_bwd and all(s["call_site"].endswith(f":{tanh_line}") and s["in_backward"] == "TanhBackward0"
                            for s in tanh_bwd), tanh_bwd
    # no finding of any kind is left at the backward() line
    assert not [g.title for g in analyze(trace) if g.call_site.endswith(f":{backward_line}")]
    json.dumps(f.to_dict())
    # the .pftrace written beside it keeps what the rule reads (fwdbwd flows, sequence numbers)
    (g,) = [g for g in analyze(neuron_prof.load(out.with_suffix(".pftrace"))) if g.kind == "cpu_fallback"
            and g.evidence.get("op") == "aten::linalg_solve_triangular"]
    assert (g.call_site, g.evidence["in_backward"]) == (f.call_site, "LinalgQrBackward0")


CUSTOM = textwrap.dedent("""\
    import torch

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return torch.cumsum(g, 0)  # LINE: own-backward

    w = torch.randn(8, requires_grad=True)
    for step in range(3):
        y = Scale.apply(w)  # LINE: apply
        y.sum().backward()  # LINE: backward
    """)


def test_the_users_own_backward_code_keeps_its_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A custom autograd.Function's backward is code the user wrote: its ops keep their own line (marked as
    backward), while the backward of the ops around it goes to their forward lines."""
    trace = _capture(tmp_path, CUSTOM)
    lines = tagged(CUSTOM)
    sites = _backward_sites(trace, "aten::cumsum")
    assert sites and all(s.call_site == f"job.py:{lines['own-backward']}" for s in sites), sites
    assert all(s.backward for s in sites), sites
    assert not any(s.call_site.endswith(f":{lines['backward']}") for s in sites)
    lazy_matches_full(trace, monkeypatch)


CUSTOM_DEVICE = Path(__file__).parent / "userland" / "custom_autograd_backward.py"


def test_a_backward_the_user_wrote_is_charged_to_its_own_lines_on_a_device(tmp_path: Path) -> None:
    """On a device, autograd runs backward on its own thread (issue 34): a fallback and a sync inside a custom
    Function's backward() name their lines there, with the .apply() line as its forward."""
    out = tmp_path / "t.json"
    r = subprocess.run([NEURON_PROF, "run", "--emulate-neuron", "-q", "-o", str(out), str(CUSTOM_DEVICE)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    src = CUSTOM_DEVICE.read_text().splitlines()
    line = {k: next(i for i, ln in enumerate(src, 1) if k in ln) for k in ("torch.histc(", "hist.max().item()",
                                                                           "SoftClip.apply(")}
    found = analyze(neuron_prof.load(out))
    (fb,) = [f for f in found if f.kind == "cpu_fallback"]
    assert fb.call_site.endswith(f"custom_autograd_backward.py:{line['torch.histc(']}"), fb.call_site
    assert fb.evidence["in_backward"] == "SoftClipBackward"
    assert fb.evidence["forward_site"].endswith(f":{line['SoftClip.apply(']}"), fb.evidence
    syncs = [f.call_site for f in found if f.kind == "sync_point"]
    assert any(s.endswith(f":{line['hist.max().item()']}") for s in syncs), syncs
