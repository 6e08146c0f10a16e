"""A plain ``profile()`` on the emulated device: the device timeline with no option (the runtime's system profile,
processed by the stand-in neuron-explorer), nothing written beside the trace but the trace, and the device
profile's window adding engine tracks and the Summary metrics (issue 21 "Done means"). Runs in a subprocess: the
emulated device registers itself process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import neuron_prof
from neuron_prof.model import TrackKind

REPO = Path(__file__).resolve().parents[1]
SCRIPT = textwrap.dedent("""
    import torch, neuron_prof, neuron_prof.emulator as emu
    emu.enable()
    m = torch.nn.Linear(64, 64).to("neuron")
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x = torch.randn(32, 64).to("neuron")

    def train(prof, n):
        for _ in range(n):
            m(x).relu().sum().backward()
            opt.step()
            opt.zero_grad()
            prof.step()

    with neuron_prof.profile("plain.json") as prof:  # no option
        train(prof, 3)
    with neuron_prof.profile("window.json", device_profile=(2, 4)) as prof:
        train(prof, 6)
""")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("emu_default")
    (d / "work").mkdir()
    (d / "work" / "s.py").write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NEURON_PROF_CACHE_DIR": str(d / "cache"),
           "NEURON_PROF_EMULATE_COMPILE_SCALE": "0.1", "NEURON_PROF_EMULATE_DEVICE_SCALE": "20"}
    p = subprocess.run([sys.executable, "s.py"], cwd=d / "work", env=env, capture_output=True, text=True,
                       timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    (d / "stderr.txt").write_text(p.stderr)
    return d


def _tracks(tr: neuron_prof.Trace) -> dict[str, np.ndarray]:
    return {tr.tracks[int(t)].name: np.flatnonzero(tr.slices.track == t) for t in tr.track_ids(TrackKind.DEVICE)}


def test_plain_profile_has_the_device_timeline_and_busy_time(work: Path) -> None:
    tr = neuron_prof.load(work / "work" / "plain.json")
    tracks = _tracks(tr)
    assert len(tracks["neuron:0 executions"]) > 0 and not any("engine" in n for n in tracks)
    assert tr.metadata["clock"] == "unix" and tr.metadata["runtime_profile"]["processed"] is True
    from neuron_prof.cli import main

    p = subprocess.run([sys.executable, "-m", "neuron_prof", "summary", str(work / "work" / "plain.json")],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert "device busy" in p.stdout and "device busy n/a" not in p.stdout, p.stdout[:1500]
    assert main is not None


def test_nothing_but_the_traces_beside_the_script_and_the_capture_is_said(work: Path) -> None:
    assert sorted(f.name for f in (work / "work").iterdir()) == [
        "plain.json", "plain.pftrace", "s.py", "window.json", "window.pftrace"]
    runs = sorted((work / "cache" / "neuron-runs").iterdir())
    assert len(runs) == 2
    err = (work / "stderr.txt").read_text()
    for r in runs:
        assert f"the Neuron runtime's capture and its tables: {r} (" in err


def test_the_device_profile_window_adds_engines_and_summary_on_the_host_clock(work: Path) -> None:
    tr = neuron_prof.load(work / "work" / "window.json")
    tracks = _tracks(tr)
    assert tr.metadata["clock"] == "unix"
    ex = tracks["neuron:0 executions"]
    engines = [n for n in tracks if "engine" in n]
    assert engines
    starts, ends = tr.slices.ts_ns[ex], tr.slices.ts_ns[ex] + tr.slices.dur_ns[ex]
    steps = tr.metadata["steps"]
    lo, hi = steps[2][1], steps[3][2]  # the window: steps 2 and 3
    issued_by = {int(d): int(s) for s, d in zip(tr.flows.src.tolist(), tr.flows.dst.tolist())}
    for n in engines:  # every engine interval lies inside one execution that a host op of the window issued
        for r in tracks[n].tolist():
            a, z = int(tr.slices.ts_ns[r]), int(tr.slices.ts_ns[r] + tr.slices.dur_ns[r])
            inside = np.flatnonzero((starts <= a + 5_000) & (z <= ends + 5_000))
            assert len(inside) == 1, (n, a, z)
            host = issued_by[int(ex[inside[0]])]
            while host in issued_by:  # nc_exec_running <- nrt_execute <- the framework op
                host = issued_by[host]
            assert lo <= int(tr.slices.ts_ns[host]) <= hi
    summary = tr.metadata["neuron_explorer"]["summary"]
    assert summary["mfu_estimated_percent"] > 0 and summary["total_time"] > 0
