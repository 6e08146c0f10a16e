"""End to end: a small workload on the emulated neuron device under neuron_prof.profile(), then analyze().

Runs the capture in a subprocess (the emulated device registers itself process-wide) and checks that
each problem the script has on purpose comes back as its own finding, with the numbers the script implies.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from neuron_prof.analysis import Finding, analyze
from neuron_prof.loaders import load

SIZES = [8, 16, 8, 24, 16, 32]

PREP = "import time\n\n\ndef preprocess(s):\n    time.sleep(s)\n"
"""The user's own host work between steps (in a module of its own, as a data pipeline would be)."""

SCRIPT = textwrap.dedent(f"""
    import torch, neuron_prof, neuron_prof.emulator as emu, prep
    emu.enable()
    w = torch.randn(16, 16).to("neuron")
    with neuron_prof.profile(OUT, quiet=True, operator_lines=True) as prof:  # x @ w's compiles at its line
        for n in {SIZES}:
            x = torch.randn(n, 16).to("neuron")
            y = (x @ w).relu()
            m = y.median()
            v = y.sum().item()
            prep.preprocess(0.1)
            prof.step()
""")


def _capture(d: Path) -> list[Finding]:
    script = d / "work.py"
    script.write_text(f"OUT = {str(d / 'trace.pftrace')!r}\n" + SCRIPT)
    (d / "prep.py").write_text(PREP)
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=d)
    assert p.returncode == 0, p.stderr[-2000:]
    return analyze(load(d / "trace.pftrace"))


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return _capture(tmp_path_factory.mktemp("e2e"))


def by_kind(findings: list[Finding], kind: str) -> list[Finding]:
    return [f for f in findings if f.kind == kind]


def test_every_probe_worked(findings: list[Finding]) -> None:
    """The Kineto part and every probe arrived (a failure would be a probe_error finding saying why)."""
    assert [f.evidence for f in by_kind(findings, "probe_error")] == []


def test_shape_churn_sees_every_size(findings: list[Finding]) -> None:
    [f] = by_kind(findings, "shape_churn")
    assert f.evidence["values"] == sorted(set(SIZES)) and f.count == len(set(SIZES))
    # calls per size from the host op spans: 8 and 16 ran twice
    assert dict(map(tuple, f.evidence["counts"])) == {8: 2, 16: 2, 24: 1, 32: 1}
    assert f.evidence["plan"]["buckets"][-1] == max(SIZES) and f.call_site.startswith("work.py:")


def test_compiles_fallback_and_sync(findings: list[Finding]) -> None:
    [c] = by_kind(findings, "first_call_compile")
    # mm, relu and sum compile once per new size (4 sizes); the steps where a size first appears
    assert {(o["op"], o["compiles"]) for o in c.evidence["ops"]} == {
        ("aten::mm", 4),
        ("aten::relu", 4),
        ("aten::sum", 4),
    }
    assert c.count == 12 and c.evidence["steps"] == [0, 1, 3, 5]
    [fb] = by_kind(findings, "cpu_fallback")
    assert fb.evidence["op"].startswith("aten::median") and fb.count == len(SIZES)
    assert fb.call_site.startswith("work.py:")
    [s] = by_kind(findings, "sync_point")
    assert s.count == len(SIZES) and s.call_site == "work.py:11"  # the .item() line, from the probe's frame
    assert s.evidence["steady_count"] == s.evidence["steady_steps"]  # one per steady step


def test_device_idle_names_the_users_call(findings: list[Finding]) -> None:
    """docs/findings.md: device_idle says what the host did, in the user's terms: here the preprocess() call
    between steps (at its line), not the .item() whose tail touches the same gap, nor the script itself."""
    [f] = by_kind(findings, "device_idle")
    python = [g for g in f.evidence["largest"] if g["host"]["what"].startswith("Python: ")]
    assert len(python) == len(SIZES) - 1  # the gap after the last step's preprocess() ends with the capture
    assert {(g["host"]["what"].split(" (")[0], g["host"]["call_site"]) for g in python} == {
        ("Python: preprocess()", "work.py:12")}
    # the compiles of new sizes are still named as such, at the line that compiled
    assert any(g["host"]["what"] == "compile of aten::mm" and g["host"]["call_site"] == "work.py:9"
               for g in f.evidence["largest"])
