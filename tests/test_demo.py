"""`neuron-prof demo`: the TinyGPT workload trains, the traces are written and the summary printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import neuron_prof
from neuron_prof.cli import main
from neuron_prof.demo import GPTConfig, TinyGPT, train
from tests._builders import json_complete_count, pftrace_slice_count
from tests.conftest import pftrace_check


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


def test_demo_subprocess_on_the_emulated_device(tmp_path: Path) -> None:
    # What `make demo` runs (default device: the emulated neuron), short and with compile costs scaled away.
    env = {**os.environ, "NEURON_PROF_EMULATE_COMPILE_SCALE": "0", "NEURON_PROF_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    (tmp_path / "work").mkdir()
    res = subprocess.run([sys.executable, "-m", "neuron_prof", "demo", "-o", str(tmp_path / "d.json"),
                          "--steps", "2"], capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path / "work")
    assert res.returncode == 0, res.stderr
    # nothing left where it ran (issue 22: `make demo` left neuron_profile/, 164 MB); the runtime's capture went to
    # the cache, and the demo said where and how big
    assert list((tmp_path / "work").iterdir()) == []
    (run,) = list((tmp_path / "cache" / "neuron-runs").iterdir())
    assert f"the Neuron runtime's capture and its tables: {run} (" in res.stderr
    out = res.stdout
    assert "2 steps on neuron" in out
    # The demo's built-in problems are found: the median falls back to the CPU, .item() syncs every step.
    assert "cpu_fallback" in out and "aten::median" in out and "sync_point" in out
    trace = neuron_prof.load(tmp_path / "d.json")
    assert trace.metadata["backend"] == "neuron"
    assert json_complete_count(tmp_path / "d.json") == pftrace_slice_count(tmp_path / "d.pftrace")


def test_demo_quiet_prints_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "-q", "-o", str(tmp_path / "q.json"), "--steps", "1", "--device", "cpu"]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "q.json"), str(tmp_path / "q.pftrace")]
