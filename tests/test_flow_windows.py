"""The streamed load's end binds flows in windows (`loaders/json/_bindwin`): with windows of a few rows forced, every
arrow must be the one the in-memory load makes, in its order, with its ids."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from neuron_prof.loaders import coldir, spill
from neuron_prof.loaders.json import stream
from neuron_prof.loaders.json.reader import load_kineto_json
from neuron_prof.model import Trace

ROOT = Path(__file__).resolve().parents[1]


def _flows(t: Trace) -> tuple[list[int], list[int], list[int], list[str], list[str]]:
    s = np.array(t.strings.as_list(), dtype=object)
    f = t.flows
    return f.src.tolist(), f.dst.tolist(), f.flow_id.tolist(), s[f.cat].tolist(), s[f.name].tolist()


def _streamed(path: Path, tmp: Path) -> Trace:
    folder = tmp / "cols"
    folder.mkdir()
    stream.ingest(path, folder, "key")
    assert not list(folder.glob(".spill-*")) and not (folder / "f_row").exists()  # no temporary file left
    return coldir.read_trace(folder)


def _events() -> list[dict[str, object]]:
    """One long parent over 60 short children on a thread, another thread's slices, and flows whose ends fall
    in other windows than their slices: s inside the parent between children (the walk back over closed
    children reaches it), f bound to the next start (it lies in the next window), chains s -> t -> f, ids used
    twice (another cat), fanned out (one s, several f) and ids that are strings."""
    ev: list[dict[str, object]] = [{"ph": "X", "name": "parent", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 0,
                                    "dur": 10_000}]
    for k in range(60):
        ev.append({"ph": "X", "name": f"child{k % 5}", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 100 * k + 10,
                   "dur": 5})
        ev.append({"ph": "X", "name": "kernel", "cat": "kernel", "pid": 0, "tid": 7, "ts": 100 * k + 50,
                   "dur": 20})
    for k in range(60):
        ev.append({"ph": "s", "id": k, "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 1, "ts": 100 * k + 40})
        ev.append({"ph": "f", "id": k, "cat": "ac2g", "name": "ac2g", "pid": 0, "tid": 7, "ts": 100 * k + 45})
        ev.append({"ph": "f", "id": k, "cat": "ac2g", "name": "ac2g", "pid": 0, "tid": 7, "ts": 100 * k + 60,
                   "bp": "e"})
        ev.append({"ph": "s", "id": k, "cat": "fwdbwd", "name": "fwdbwd", "pid": 1, "tid": 1, "ts": 100 * k + 12})
        ev.append({"ph": "f", "id": k, "cat": "fwdbwd", "name": "fwdbwd", "pid": 1, "tid": 1,
                   "ts": 100 * (59 - k) + 30})
    for k in range(0, 60, 4):  # ids that are no int (kept as keys, given fresh flow ids)
        ev.append({"ph": "s", "id": f"x{k}", "cat": "odd", "name": "o", "pid": 1, "tid": 1, "ts": 100 * k + 13})
        ev.append({"ph": "f", "id": f"x{k}", "cat": "odd", "name": "o", "pid": 0, "tid": 7, "ts": 100 * k + 52,
                   "bp": "e"})
    for k in range(0, 60, 3):
        ev.append({"ph": "s", "id": 1000 + k, "cat": "chain", "name": "c", "pid": 1, "tid": 1, "ts": 100 * k + 11})
        ev.append({"ph": "t", "id": 1000 + k, "cat": "chain", "name": "c", "pid": 0, "tid": 7, "ts": 100 * k + 55})
        ev.append({"ph": "f", "id": 1000 + k, "cat": "chain", "name": "c", "pid": 1, "tid": 1,
                   "ts": 100 * (k + 7) + 20})
    return ev


@pytest.mark.parametrize("window", [3, 8, 64])
def test_flows_bound_in_small_windows_are_the_in_memory_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             window: int) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": _events(), "baseTimeNanoseconds": 1_000_000_000}))
    monkeypatch.setattr(spill, "WINDOW", window)
    held, got = load_kineto_json(path), _streamed(path, tmp_path)
    want = _flows(held)
    assert len(want[0]) > 225  # every kind of arrow above is there
    assert _flows(got) == want
    assert got.metadata.get("load_warnings") == held.metadata.get("load_warnings")


def test_a_generated_trace_bound_in_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Kineto's flows (ac2g with bp "e", fwdbwd) over ~21k slices in windows of 4,096 rows, pieces of 1 MB."""
    path = tmp_path / "t.json"
    subprocess.run([sys.executable, "-m", "bench.gen_trace", "60000", str(path)], cwd=ROOT, check=True,
                   capture_output=True)
    monkeypatch.setenv("NEURON_PROF_STREAM_PIECE_MB", "1")
    monkeypatch.setattr(spill, "WINDOW", 4096)
    held, got = load_kineto_json(path), _streamed(path, tmp_path)
    assert len(held.flows) > 8000
    assert _flows(got) == _flows(held)


@pytest.mark.parametrize("slices", [0, 1])
def test_flow_ends_without_slices_to_bind_to(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slices: int) -> None:
    """Endpoints in windows that hold no slice (none at all, or one far from them): unbound, as in memory."""
    ev: list[dict[str, object]] = [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 5, "dur": 1}][:slices]
    for k in range(20):
        ev.append({"ph": "s", "id": k, "cat": "c", "name": "n", "pid": 1, "tid": 2, "ts": 10 + k})
        ev.append({"ph": "f", "id": k, "cat": "c", "name": "n", "pid": 1, "tid": 3, "ts": 11 + k})
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": ev}))
    monkeypatch.setattr(spill, "WINDOW", 4)
    held, got = load_kineto_json(path), _streamed(path, tmp_path)
    assert _flows(got) == _flows(held) and not len(got.flows)
    assert got.metadata.get("load_warnings") == held.metadata.get("load_warnings")
