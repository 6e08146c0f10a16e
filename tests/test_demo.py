"""`neuron-prof demo`: the TinyGPT workload trains, the traces are written and the summary printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

import neuron_prof
from neuron_prof.cli import main
from neuron_prof.demo import GPTConfig, TinyGPT, train
from tests.test_capture import json_complete_count, pftrace_check, pftrace_slice_count


def test_tinygpt_learns_on_cpu() -> None:
    torch.manual_seed(0)
    model = TinyGPT(GPTConfig())
    losses = train(model, "cpu", 10)
    assert losses[0] > 5.0  # ~ln(256) at the start
    assert losses[-1] < losses[0] - 1.0


def test_demo_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "trace.json"
    assert main(["demo", "-o", str(out), "--steps", "3", "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    assert "3 steps on cpu" in text and "host op" in text and "aten::" in text  # the summary's op table
    assert f"neuron-prof tui {out}" in text and "ui.perfetto.dev" in text
    pf = tmp_path / "trace.pftrace"
    assert json_complete_count(out) == pftrace_slice_count(pf)
    assert pftrace_check(pf).returncode == 0
    trace = neuron_prof.load(out)
    assert [s[0] for s in trace.metadata["steps"]] == [0, 1, 2]


def test_demo_subprocess(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "neuron_prof", "demo", "-q", "-o", str(tmp_path / "d.json"),
                          "--steps", "2", "--device", "cpu"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [str(tmp_path / "d.json"), str(tmp_path / "d.pftrace")]
