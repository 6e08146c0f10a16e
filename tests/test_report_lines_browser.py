"""The lines view and the per-step breakdown of the HTML report in headless Chromium (issue 23): a real
capture of a training loop whose forward calls torch.linalg.qr."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from neuron_prof.analysis import report
from neuron_prof.exporters.html_report import write_html_report
from neuron_prof.loaders import load
from tests.browser import Chromium
from tests.test_report_browser import _check_page, chromium  # noqa: F401  (the module's browser fixture)

NEURON_PROF = str(Path(sys.executable).with_name("neuron-prof"))
TRAIN = textwrap.dedent("""\
    import torch

    lin = torch.nn.Linear(16, 8)
    opt = torch.optim.SGD(lin.parameters(), lr=0.01)
    x = torch.randn(32, 16)
    for step in range(4):
        h = torch.tanh(lin(x))
        q, _ = torch.linalg.qr(h)  # LINE: qr
        loss = q.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
    """)
ROWS = ("Array.from(document.querySelectorAll('#lines table.lines tbody tr'))"
        ".map(r => Array.from(r.cells).map(c => c.textContent))")
HEAD = "Array.from(document.querySelectorAll('#lines table.lines thead th')).map(c => c.textContent)"
STEP_TRACES = ("(() => { const d = document.getElementById('fig-steps');"
               " return {bars: d.querySelectorAll('g.trace.bars').length,"
               " legend: Array.from(d.querySelectorAll('.legendtext')).map(t => t.textContent),"
               " mode: d.layout && d.layout.barmode}; })()")


def test_report_lines_table_and_step_bars(chromium: Chromium, tmp_path: Path) -> None:  # noqa: F811
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    trace_path = tmp_path / "t.json"
    r = subprocess.run([NEURON_PROF, "run", "-q", "-o", str(trace_path), str(script)], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    tr = load(trace_path)
    rep = report(tr)
    assert rep.steps, "the loop's optimizer steps are the steps"
    out = write_html_report(tr, tmp_path / "r.html", rep.findings, rep.totals, lines=rep.lines,
                            steps=rep.steps)
    page = _check_page(chromium, out, evals={"rows": ROWS, "head": HEAD, "steps": STEP_TRACES})
    head = page.values["head"]
    rows = [dict(zip(head, r)) for r in page.values["rows"]]
    qr_line = next(i for i, ln in enumerate(TRAIN.splitlines(), 1) if "# LINE: qr" in ln)
    qr = next(r for r in rows if r["line"] == f"train.py:{qr_line}")
    assert qr["source"] == "q, _ = torch.linalg.qr(h)  # LINE: qr"
    assert "LinalgQrBackward0" in qr["backward of"] and float(qr["in bwd"]) > 0
    # one row per line: the lines of the loop, never a library frame
    assert len({r["line"] for r in rows}) == len(rows)
    assert not any(r["line"].startswith(("torch/", "threading.py")) for r in rows)
    # the step bars: stacked, one bar trace per part present, named in the legend
    steps = page.values["steps"]
    assert steps["mode"] == "stack" and steps["bars"] >= 2 and "host" in steps["legend"], steps
