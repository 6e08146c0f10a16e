"""`bench capture`'s table (issue 32): the emulated device's launch-mode row predicts a CUDA row's ratio, printed
beside the measured one. No GPU here: the rows are real measurements (tiny sizes), and a CPU row's measurement
stands in for the CUDA row that this machine cannot measure; nothing else is faked. No timing is asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import bench_capture

REPO = Path(__file__).resolve().parents[1]


def _measure(device: str, style: str, env: dict[str, str]) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench._capture_rows", "--device", device, "--style", style, "--rounds", "2",
           "--steps", "2", "--iters", "5"]
    p = subprocess.run(cmd, cwd=REPO, env={**os.environ, **env, "PYTHONPATH": str(REPO)}, capture_output=True,
                       text=True, timeout=300, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    out: dict[str, Any] = json.loads(p.stdout.strip().splitlines()[-1])
    return out


@pytest.fixture(scope="module")
def measured() -> dict[str, dict[str, Any]]:
    name, device, style, env = bench_capture.ROWS[2]
    return {"cpu": _measure("cpu", "ops", {}), name: _measure(device, style, env)}


def test_a_cuda_row_prints_the_ratio_its_emulated_row_predicted(measured: dict[str, dict[str, Any]]) -> None:
    emu_name = bench_capture.PREDICTED_BY[("cuda", "ops")]
    d_emu = measured[emu_name]
    assert d_emu["device"] == "neuron" and d_emu["host_cost"] == "launch" and d_emu["launch"] == "0"
    ratios: dict[str, float] = {}
    cpu_cells = bench_capture.cells("cpu, operators", "cpu", "ops", measured["cpu"], ratios)
    emu_cells = bench_capture.cells(emu_name, "neuron", "ops", d_emu, ratios)
    assert cpu_cells[5] == "" and emu_cells[5] == ""  # only CUDA rows are predicted
    # the ratio in CPU time (the process's, per step) beside the wall-time one
    cpu_time = measured["cpu"]["per_round_cpu_s"]
    assert all(len(v) == 2 and all(x > 0 for x in v) for v in cpu_time.values())
    assert cpu_cells[6] == "{:.3f}x ({:.3f}-{:.3f})".format(*bench_capture.ratio(measured["cpu"], "per_round_cpu_s"))
    cuda_cells = bench_capture.cells("cuda, operators", "cuda", "ops", measured["cpu"], ratios)
    assert cuda_cells[4].startswith(f"{bench_capture.ratio(measured['cpu'])[0]:.3f}x (")
    assert cuda_cells[5] == f"{ratios[emu_name]:.3f}x" == f"{bench_capture.ratio(d_emu)[0]:.3f}x"


def test_every_cuda_row_has_an_emulated_launch_mode_row_to_predict_it() -> None:
    names = {r[0]: r for r in bench_capture.ROWS}
    for _, device, style, _ in bench_capture.CUDA_ROWS:
        name, edev, estyle, env = names[bench_capture.PREDICTED_BY[(device, style)]]
        assert (edev, estyle) == ("neuron", style)
        assert env == {"NEURON_PROF_EMULATE_HOST_COST": "launch", "NEURON_LAUNCH_BLOCKING": "0"}
