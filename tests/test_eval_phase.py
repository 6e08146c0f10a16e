"""An evaluation pass (under no_grad) with a new batch size compiles mid-run (issue 34): its compiles are a
phase after warm-up at the evaluation loop's call of the model, and `check` counts them, also when the pass
falls in the window of the second training step (one batch per epoch)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import neuron_prof
from neuron_prof.analysis import Context
from neuron_prof.analysis.steps.boundaries import SLOW_FACTOR
from neuron_prof.analysis.steps.evaluation import eval_overlap_ns, evaluation_passes
from neuron_prof.cli import main

NEURON_PROF = str(Path(sys.executable).with_name("neuron-prof"))
PROGRAM = Path(__file__).parent / "userland" / "eval_loop_dataloader.py"


@pytest.fixture(scope="module")
def trace_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("eval")
    out = d / "t.json"
    r = subprocess.run([NEURON_PROF, "run", "--emulate-neuron", "-q", "--no-pftrace", "-o", str(out), str(PROGRAM)],
                       capture_output=True, text=True, timeout=300, cwd=d)
    assert r.returncode == 0, r.stderr[-3000:]
    return out


def _line(text: str) -> int:
    return next(i for i, ln in enumerate(PROGRAM.read_text().splitlines(), 1) if text in ln)


def test_evaluation_passes_and_warmup_from_training_time(trace_path: Path) -> None:
    trace = neuron_prof.load(trace_path)
    passes = evaluation_passes(trace)
    assert len(passes) == 4 and all(p.calls == 2 for p in passes), passes
    assert all(p.call_site.endswith(f"eval_loop_dataloader.py:{_line('logits = model(xb)')}") for p in passes)
    st = Context(trace).steps
    # warm-up is chosen on training time: the evaluation passes inside the steps' windows are left out. Which
    # steps are slow is the machine's (a loaded machine can make step 2 slow too), so the expected warm-up is
    # the rule on training time, computed here from the passes, never on the windows' wall time
    assert len(st) == 4
    inside = eval_overlap_ns(passes, st.start_ns, st.end_ns)
    assert inside.sum() >= sum(p.end_ns - p.start_ns for p in passes[:1]) > 0
    train = (st.end_ns - st.start_ns) - inside
    expected = 1
    while expected < 3 and train[expected] > SLOW_FACTOR * float(np.median(train[expected + 1:])):
        expected += 1
    assert st.warmup == expected


def test_an_evaluations_compiles_are_after_warmup_at_its_call_of_the_model(
        trace_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["summary", str(trace_path), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["findings"]
    ev = [f for f in found if f["kind"] == "first_call_compile" and f["evidence"].get("evaluation")]
    assert len(ev) == 1, [f["title"] for f in found]
    site = f"eval_loop_dataloader.py:{_line('logits = model(xb)')}"
    assert ev[0]["call_site"].endswith(site) and ev[0]["after_warmup"] is True, ev[0]
    assert "evaluation" in ev[0]["title"] and "\n" not in ev[0]["title"]
    assert main(["check", str(trace_path)]) == 1
    out = capsys.readouterr().out
    assert any("first_call_compile" in ln and ln.rstrip().endswith(site) for ln in out.splitlines()), out
