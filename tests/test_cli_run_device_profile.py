"""`neuron-prof run`: the runtime's capture with no code change: the system profile by default (in neuron-prof's
cache, said on stderr), `--profile-dir`, the device profile's window counted in optimizer steps
(`--device-profile-steps`), `--no-system-profile`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

import neuron_prof
from tests.userland import _fork as forked

REPO = Path(__file__).resolve().parents[1]
SCRIPT = """
import torch
m = torch.nn.Linear(16, 16).to(DEVICE)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for _ in range(4):
    m(torch.randn(4, 16).to(DEVICE)).sum().backward()
    opt.step()
"""


def _run(tmp: Path, device: str, *opts: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    (tmp / "s.py").write_text(f"DEVICE = {device!r}\n" + SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NEURON_PROF_EMULATE_COMPILE_SCALE": "0.1",
           "NEURON_PROF_CACHE_DIR": str(tmp / "cache"), **(env or {})}
    env.pop("NEURON_PROF_EMULATE", None)
    # `neuron-prof run` through main() in a process forked from one that imported torch already (the suite's time)
    return forked.run([forked.CLI, "run", *opts, "-o", str(tmp / "t.json"), str(tmp / "s.py")], cwd=tmp, env=env,
                      timeout=120)


def test_by_default_the_system_profile_goes_to_the_cache_and_is_said(tmp_path: Path) -> None:
    p = _run(tmp_path, "neuron", "--emulate-neuron")
    assert p.returncode == 0, p.stderr[-3000:]
    assert sorted(f.name for f in tmp_path.iterdir()) == ["cache", "s.py", "t.json", "t.pftrace"]  # nothing else
    (run,) = list((tmp_path / "cache" / "neuron-runs").iterdir())
    assert (run / "parquet" / "SystemProfileEvents.parquet").is_file() and not list(run.rglob("*.ntff"))
    assert list(run.rglob("ntrace.pb")) and not list(run.rglob("trace.json"))  # processed: the big JSON is gone
    assert f"the Neuron runtime's capture and its tables: {run} (" in p.stderr and " MB, " in p.stderr
    meta = orjson.loads((tmp_path / "t.json").read_bytes())["neuron_prof"]["metadata"]
    assert meta["runtime_profile"]["cycle_modes"] == [["RUNTIME"]]


def test_the_device_profile_window_in_optimizer_steps(tmp_path: Path) -> None:
    p = _run(tmp_path, "neuron", "--emulate-neuron", "--device-profile-steps", "1:3", "--profile-dir",
             str(tmp_path / "dp"))
    assert p.returncode == 0, p.stderr[-3000:]
    caps = sorted((tmp_path / "dp").glob("*_pid_*/*/"))
    assert [len(list(c.glob("*.ntff"))) for c in caps] == [0, 1, 0]  # steps 0, 1-2 (the window), 3
    assert all((c / "trace.json").is_file() for c in caps)  # the user's folder is kept as it is
    # NeuronConfig's neff_cache_dir is the job's cache (here the emulator's in-memory stand-in for /tmp/neff_cache):
    # the NEFFs of what ran are copied into the window's capture folder on stop; no new cache folder is made
    assert {n.name for n in caps[1].glob("*.neff")} >= {"aten__addmm.neff"} and not list(caps[0].glob("*.neff"))
    assert not (tmp_path / "dp" / "neff_cache").exists()
    (dev,) = [d for d in (tmp_path / "dp" / "parquet").iterdir() if d.is_dir()]  # the device profile's own folder
    assert {"ActiveTime", "ExecutionInfo", "Summary", "Metadata", "DeviceProfileList"} <= {
        f.stem for f in dev.glob("*.parquet")}
    assert not (tmp_path / "cache" / "neuron-runs").exists()  # the folder given, not the cache
    doc = orjson.loads((tmp_path / "t.json").read_bytes())
    assert [s[0] for s in doc["neuron_prof"]["metadata"]["steps"]] == [0, 1, 2, 3]  # each optimizer.step() ended a step
    # ... once it had returned: a cycle ended inside torch's Optimizer.step span corrupts Kineto's storage
    # (a segfault at the session's stop), so every Optimizer.step span lies inside one ProfilerStep
    spans = [(e["name"], e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"] if e.get("ph") == "X"]
    marks = [(a, b) for n, a, b in spans if n.startswith("ProfilerStep#")]
    opt = [(a, b) for n, a, b in spans if n.startswith("Optimizer.step#")]
    assert len(opt) == 4 and all(any(a <= s and e <= b for a, b in marks) for s, e in opt), (marks, opt)


def test_a_stock_release_build_says_what_it_cannot_attribute(tmp_path: Path) -> None:
    """NEURON_PROF_EMULATE_BUILD=release: a stock torch-neuronx release build, NEURON_LAUNCH_BLOCKING=1 by default
    (torch-neuronx-facts, "Corrections") and so an empty framework mapping (the SDK documents framework mapping as
    incompatible with it; issue 33). The trace keeps what it can attribute (host ops, the runtime's launches, the
    device executions, per NEFF from the device profile), one finding says what it cannot and the documented
    setting that gets it, and no line shows a device time of 0 as if measured."""
    env = {"NEURON_PROF_EMULATE_BUILD": "release", "NEURON_LAUNCH_BLOCKING": ""}  # "": unset
    p = _run(tmp_path, "neuron", "--emulate-neuron", "--device-profile-steps", "2", "--profile-dir",
             str(tmp_path / "dp"), env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    caps = sorted((tmp_path / "dp").glob("*_pid_*/*/"))
    for c in caps:  # the runtime kept no framework mapping
        (m,) = list(c.glob("framework_mapping_*.json"))
        assert orjson.loads(m.read_bytes())["data"] == []
    tr = neuron_prof.load(tmp_path / "t.json")
    assert tr.metadata["runtime_profile"]["NEURON_LAUNCH_BLOCKING"] == "unset"
    names = [tr.slice_name(i) for i in range(len(tr.slices))]
    execs = names.count("nc_exec_running")
    assert execs and names.count("nrt_execute") == execs and "aten::addmm" in names  # launches and host ops
    links = {(tr.slice_name(int(a)), tr.slice_name(int(z))) for a, z in zip(tr.flows.src, tr.flows.dst)}
    into = {a for a, z in links if z in ("nrt_execute", "nc_exec_running")}
    assert into == {"nrt_execute"}  # the runtime's call -> its execution; no op -> runtime call
    (f,) = [f for f in tr.findings if f["kind"] == "device_unattributed"]
    assert f["count"] == execs and "NEURON_LAUNCH_BLOCKING=0" in f["advice"] and "release builds" in f["advice"]
    assert "aten__addmm.neff" in f["evidence"]["executions_per_neff"]  # the device profile's executions per NEFF
    out = subprocess.run([sys.executable, "-m", "neuron_prof", "summary", "--json", str(tmp_path / "t.json")],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    doc = orjson.loads(out.stdout)
    assert doc["lines"] and all(ln["device_ns"] is None for ln in doc["lines"])  # unknown, not 0
    assert not (doc["totals"].get("neuron_explorer") or {}).get("device_lines")
    text = subprocess.run([sys.executable, "-m", "neuron_prof", "summary", str(tmp_path / "t.json")],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)}).stdout
    assert "device_unattributed" in text and "your line (device executions)" not in text


def test_no_system_profile_captures_nothing_of_the_runtime(tmp_path: Path) -> None:
    p = _run(tmp_path, "neuron", "--emulate-neuron", "--no-system-profile")
    assert p.returncode == 0, p.stderr[-3000:]
    assert not (tmp_path / "cache" / "neuron-runs").exists() and "runtime's capture" not in p.stderr


def test_without_a_neuron_device_the_script_runs_and_the_trace_says_why(tmp_path: Path) -> None:
    p = _run(tmp_path, "cpu", "--device-profile")
    assert p.returncode == 0, p.stderr[-3000:]
    meta = orjson.loads((tmp_path / "t.json").read_bytes())["neuron_prof"]["metadata"]
    errors = [e["error"] for e in meta.get("probe_errors", []) if e["probe"] == "runtime_profile"]
    assert errors and "needs the neuron backend" in errors[0], meta.get("probe_errors")
