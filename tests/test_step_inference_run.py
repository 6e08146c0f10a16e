"""`neuron-prof run` on unmodified fixed-shape scripts (no prof.step()): summary reports one step per
iteration, with the boundaries the script itself measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import neuron_prof
from neuron_prof.analysis.steps.boundaries import make_steps
from neuron_prof.cli import main

REPO = Path(__file__).resolve().parents[1]
N = 6
TOL = 200_000

MODULE_LEVEL = f"""
    import json, sys, time, torch
    from torch import nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(8, 16), torch.randn(8, 1)
    marks = []
    for i in range({N}):
        t0 = time.time_ns()
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        t1 = time.time_ns()
        opt.step()
        marks.append((t0, t1, time.time_ns()))
    json.dump(marks, open(sys.argv[1], "w"))
"""

IN_MAIN = f"""
    import json, sys, time, torch
    from torch import nn

    def train(model, opt, x, y):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    def main():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
        x, y = torch.randn(8, 16), torch.randn(8, 1)
        marks = []
        for i in range({N}):
            t0 = time.time_ns()
            train(model, opt, x, y)
            marks.append((t0, t0, time.time_ns()))
        json.dump(marks, open(sys.argv[1], "w"))

    if __name__ == "__main__":
        main()
"""


def _script(tmp_path: Path, body: str) -> Path:
    s = tmp_path / "train.py"
    s.write_text(textwrap.dedent(body))
    return s


def _summary_steps(out: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    capsys.readouterr()
    assert main(["summary", "--json", str(out)]) == 0
    return json.loads(capsys.readouterr().out)["totals"]["steps"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("body", "marker"), [(MODULE_LEVEL, "Optimizer.step#AdamW.step"),
                                              (IN_MAIN, "Optimizer.step#SGD.step")], ids=["module", "main"])
def test_run_infers_one_step_per_iteration(tmp_path: Path, capsys: pytest.CaptureFixture[str], body: str,
                                           marker: str) -> None:
    # GIVEN a fixed-shape training script that never calls prof.step()
    script, out, marks_file = _script(tmp_path, body), tmp_path / "t.json", tmp_path / "marks.json"
    # WHEN it runs under `neuron-prof run`
    assert main(["run", "-q", "-o", str(out), str(script), str(marks_file)]) == 0
    # THEN summary --json counts one step per iteration, and says where they came from
    st = _summary_steps(out, capsys)
    assert st["count"] == N and st["source"] == "inferred: optimizer step" and st["markers"] == [marker]
    assert st["warmup"] >= 1 and st["steady_step_ns"] is not None
    assert _summary_steps(out.with_suffix(".pftrace"), capsys) == st
    # and each step ends with its iteration's optimizer step, as the script measured
    steps = make_steps(neuron_prof.load(out))
    for k, (t0, t1, t2) in enumerate(json.loads(marks_file.read_text())):
        assert t1 - TOL <= steps.end_ns[k] <= t2 + TOL
        assert steps.start_ns[k] >= (t0 - TOL if k == 0 else steps.end_ns[k - 1])


def test_run_as_a_process_reports_the_inferred_steps(tmp_path: Path) -> None:
    script, out = _script(tmp_path, MODULE_LEVEL), tmp_path / "sp.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = [sys.executable, "-m", "neuron_prof"]
    res = subprocess.run([*run, "run", "-q", "-o", str(out), str(script), str(tmp_path / "m.json")],
                         check=False, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    res = subprocess.run([*run, "summary", "--json", str(out)], check=False, capture_output=True, text=True,
                         timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    st = json.loads(res.stdout)["totals"]["steps"]
    assert st["count"] == N and st["source"] == "inferred: optimizer step" and st["ids"] == list(range(N))
