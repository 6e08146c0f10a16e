"""`neuron-prof run --device-profile[-dir]`: the device profile asked for with no code change."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
SCRIPT = """
import torch
m = torch.nn.Linear(16, 16).to(DEVICE)
for _ in range(2):
    m(torch.randn(4, 16).to(DEVICE)).sum().item()
"""


def _run(tmp: Path, device: str, *opts: str) -> subprocess.CompletedProcess[str]:
    (tmp / "s.py").write_text(f"DEVICE = {device!r}\n" + SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NEURON_PROF_EMULATE_COMPILE_SCALE": "0.1"}
    env.pop("NEURON_PROF_EMULATE", None)
    return subprocess.run([sys.executable, "-m", "neuron_prof", "run", "-q", *opts, "-o", str(tmp / "t.json"),
                           str(tmp / "s.py")], cwd=tmp, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


def test_the_device_profile_goes_to_the_folder_given(tmp_path: Path) -> None:
    p = _run(tmp_path, "neuron", "--emulate-neuron", "--device-profile-dir", str(tmp_path / "dp"))
    assert p.returncode == 0, p.stderr[-3000:]
    (ts,) = list((tmp_path / "dp").glob("*_pid_*/*/"))
    assert (ts / "trace.json").is_file() and (ts / "parquet" / "SystemProfileEvents.parquet").is_file()
    assert not (tmp_path / "neuron_profile").exists()


def test_without_a_neuron_device_the_script_runs_and_the_trace_says_why(tmp_path: Path) -> None:
    p = _run(tmp_path, "cpu", "--device-profile")
    assert p.returncode == 0, p.stderr[-3000:]
    meta = orjson.loads((tmp_path / "t.json").read_bytes())["neuron_prof"]["metadata"]
    errors = [e["error"] for e in meta.get("probe_errors", []) if e["probe"] == "device_profile"]
    assert errors and "needs the neuron backend" in errors[0], meta.get("probe_errors")
