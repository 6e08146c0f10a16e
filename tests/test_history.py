"""The run history written by `profile()` on CPU (issue 36 item 3): one row per capture pointing at its trace,
kept readable when the same path is written again; a history that cannot be written is a CaptureWarning after
the block, never an exception in the user's program; NEURON_PROF_HISTORY=0 records nothing."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

import neuron_prof
from neuron_prof import history
from neuron_prof.analysis import compute_totals


def _capture(path: Path) -> float:
    with neuron_prof.profile(path, quiet=True, pftrace=False) as prof:
        for _ in range(4):
            y = (torch.ones(64, 64) @ torch.ones(64, 64)).sum()
            prof.step()
    return float(y)


def test_each_capture_is_a_row_and_its_trace_stays_readable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_PROF_DATA_DIR", str(tmp_path / "data"))
    out = tmp_path / "t.json"
    _capture(out)
    first = history.row_of(out)
    assert first is not None and first["trace_path"] == str(out.resolve())
    assert first["step_count"] == 4 and first["wall_ns"] > 0 and first["source"] == "capture"
    _capture(out)  # the same path again: the first run's trace is replaced on disk
    rows = history.runs()
    assert len(rows) == 2 and rows[0]["id"] > rows[1]["id"]
    kept = history.trace_of(rows[1])
    assert kept is not None and kept != out and kept.is_file()
    start = compute_totals(neuron_prof.load(kept))["start_ns"]
    assert start == rows[1]["start_ns"] != rows[0]["start_ns"]  # the first run's own trace
    # without the history's link, an overwritten file is no baseline
    Path(rows[1]["kept_path"]).unlink()
    assert history.trace_of(rows[1]) is None


def test_a_history_that_cannot_be_written_is_a_warning(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("NEURON_PROF_DATA_DIR", str(blocker / "data"))  # a folder under a file
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _capture(tmp_path / "t.json") == 64.0 * 64 * 64
    msgs = [str(w.message) for w in caught if isinstance(w.message, neuron_prof.capture.CaptureWarning)]
    assert any("run history" in m for m in msgs), msgs
    assert (tmp_path / "t.json").is_file()


def test_history_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_PROF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("NEURON_PROF_HISTORY", "0")
    _capture(tmp_path / "t.json")
    assert history.runs() == [] and not (tmp_path / "data").exists()
