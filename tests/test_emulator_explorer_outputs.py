"""The stand-in ``neuron-explorer`` writes what the documents say the real one writes for ``--output-format
perfetto`` and ``summary-json``, and CPU_UTIL / HOST_MEMORY captures become ``CpuUsage`` / ``HostMemUsage``;
neuron-prof reads each as such. One capture through ``neuron-prof run --emulate-neuron --host-usage
--device-profile-steps 0`` (module fixture), then the documented commands on its run directory.

Documents: view-perfetto.rst (file names; processes by ``instance_id,process_id``, rows by
``worker_gid,lnc_idx,thread_id``; ``lnc_idx`` and ``worker_gid`` on each event; one device file per unique
compiled model), the 2.34 announcement (summary-json stays; full-profile json no longer maintained),
profile-artifacts.rst (``cpu_util.pb``, ``host_mem.pb``), schema 7.4.0 (``CpuUsage``, ``HostMemUsage``,
``Summary``). Where they stop (summary-json's layout, the device file's rows), the tests use only those names."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pyarrow.parquet as pq
import pytest

from neuron_prof.loaders import load
from neuron_prof.loaders.explorer._schema import builtin
from neuron_prof.model import TrackKind
from tests.conftest import pftrace_check

REPO = Path(__file__).resolve().parents[1]
SCRIPT = """
import torch
m = torch.nn.Linear(32, 32).to("neuron")
x = torch.randn(8, 32).to("neuron")
for _ in range(3):
    y = m(x)
    y.sum().item()
"""
ENV = {**os.environ, "PYTHONPATH": str(REPO), "NEURON_LAUNCH_BLOCKING": "0",
       "NEURON_PROF_EMULATE_COMPILE_SCALE": "0.1", "NEURON_PROF_EMULATE_DEVICE_SCALE": "100"}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("explorer_outputs")
    (tmp / "s.py").write_text(SCRIPT)
    p = subprocess.run([sys.executable, "-m", "neuron_prof", "run", "-q", "--emulate-neuron", "--host-usage",
                        "--device-profile-steps", "0", "--profile-dir", str(tmp / "np"), "-o", str(tmp / "t.json"),
                        str(tmp / "s.py")], cwd=tmp, env=ENV, capture_output=True, text=True, timeout=180, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    return tmp / "np"


def _explorer(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "neuron_prof.emulator.neuron_explorer", *args], env=ENV,
                          capture_output=True, text=True, timeout=180, check=False)


def test_host_usage_modes_are_captured_and_tabled(run_dir: Path) -> None:
    (cap,) = list(run_dir.glob("*_pid_*/*/"))
    assert {"cpu_util.pb", "host_mem.pb"} <= {p.name for p in cap.iterdir()}  # profile-artifacts.rst's names
    tables = run_dir / "parquet"
    declared = {(r["table_name"], r["field_name"]) for r in pq.read_table(tables / "SchemaFields.parquet").to_pylist()}
    schema = builtin().tables
    for table, need in (("CpuUsage", {"timestamp", "util_percent", "cpu_id", "instance_id"}),
                        ("HostMemUsage", {"timestamp", "used_bytes", "used_percent", "instance_id"})):
        t = pq.read_table(tables / f"{table}.parquet")
        assert t.num_rows >= 2 and need <= set(t.column_names) <= set(schema[table]), table
        assert {(table, c) for c in t.column_names} <= declared
    cpu = pq.read_table(tables / "CpuUsage.parquet").to_pylist()
    assert all(0.0 <= r["util_percent"] <= 100.0 for r in cpu)
    mem = pq.read_table(tables / "HostMemUsage.parquet").to_pylist()
    assert all(r["used_bytes"] > 0 and 0.0 < r["used_percent"] < 100.0 for r in mem)
    # the session's trace shows them, and asked for the modes in every cycle
    tr = load(run_dir.parent / "t.json")
    assert all({"CPU_UTIL", "HOST_MEMORY"} <= set(m) for m in tr.metadata["runtime_profile"]["cycle_modes"])
    names = {t.name for t in tr.tracks if t.is_counter}
    assert "host memory used" in names and any(n.startswith("CPU ") and n.endswith("utilisation") for n in names)


def test_perfetto_output_is_the_documented_files_and_reads_as_one_trace(run_dir: Path) -> None:
    out = run_dir / "pf"
    p = _explorer("view", "-d", str(run_dir), "--output-format", "perfetto", "--output-file", str(out))
    assert p.returncode == 0, p.stderr
    system = out / "system_profile.pftrace"
    devices = sorted(out.glob("device_profile_model_*.pftrace"))
    neffs = {r["neff_name"] for d in (run_dir / "parquet").iterdir() if d.is_dir()
             for r in pq.read_table(d / "ExecutionInfo.parquet").to_pylist()}
    assert system.is_file() and len(devices) == len(neffs) >= 2  # one per unique compiled model
    for f in (system, *devices):
        r = pftrace_check(f)
        assert r.returncode == 0 and "errors: {}" in r.stdout and "warnings: {}" in r.stdout, r.stdout
    tr = load(out)
    own = tr.metadata["neuron_explorer"]
    assert own["framework_trace"].endswith("trace.json")  # the one process of the run directory above
    # every event shows lnc_idx and worker_gid as the docs say; each row is one (worker, lnc, thread)
    hw = [int(r) for r in tr.slices_on(TrackKind.DEVICE) if tr.slice_name(int(r)) == "nc_exec_running"]
    assert hw and all({"lnc_idx", "worker_gid"} <= set(tr.slice_args(r)) for r in hw)
    # the device files are on the host clock, each inside an execution of its NEFF
    assert all(c == {"how": "unix", "inside_execution": True} for c in own["device_clock"].values())
    executions = {(int(tr.slices.ts_ns[r]), int(tr.slices.ts_ns[r] + tr.slices.dur_ns[r])): tr.slice_args(r)
                  for r in hw}
    for r in tr.slices_on(TrackKind.DEVICE).tolist():
        if tr.slice_name(int(r)).endswith(".neff"):
            a, z = int(tr.slices.ts_ns[r]), int(tr.slices.ts_ns[r] + tr.slices.dur_ns[r])
            assert any(s <= a and z <= e and args.get("neff_name") == tr.slice_name(int(r))
                       for (s, e), args in executions.items())
    # the host-usage counters come along
    assert any(t.is_counter and t.name == "host memory used" for t in tr.tracks)
    p = _explorer("view", "-d", str(run_dir), "--output-format", "perfetto", "--output-file", str(run_dir / "pf2"),
                  "--ignore-device-profile")
    assert p.returncode == 0 and not list((run_dir / "pf2").glob("device_profile_model_*"))


def test_summary_json_holds_the_summary_fields_and_is_read_beside_the_tables(run_dir: Path) -> None:
    p = _explorer("view", "-d", str(run_dir), "--output-format", "summary-json")
    assert p.returncode == 0, p.stderr
    doc = orjson.loads(p.stdout)
    summary_fields = set(builtin().tables["Summary"])
    (key, metrics), = doc.items()  # one device profile in this run
    assert {"total_time", "mfu_estimated_percent", "tensor_engine_active_time_percent"} <= set(metrics)
    assert set(metrics) <= summary_fields
    (run_dir / "parquet" / key / "summary.json").write_text(p.stdout)
    tr = load(run_dir / "parquet" / key)
    assert tr.metadata["neuron_explorer"]["summary_json"] == {"summary.json": doc}


def test_the_retired_full_profile_json_is_not_written(run_dir: Path) -> None:
    p = _explorer("view", "-d", str(run_dir), "--output-format", "json")
    assert p.returncode == 2 and "invalid choice" in p.stderr


def test_ignore_system_profile_writes_the_device_profile_alone(run_dir: Path) -> None:
    """``--ignore-system-profile``: "Skip system profiles (device-only view)" (how-to-profile-workload.rst), for
    Parquet and Perfetto (the profiler guide's list of formats). Which tables go is not documented: the system
    profile's (``SystemProfile*``, ``CpuUsage``, ``HostMemUsage``) are not written; the reader says it lacks it."""
    out = run_dir / "device_only"
    p = _explorer("view", "-d", str(run_dir), "--output-format", "parquet", "--output-file", str(out),
                  "--ignore-system-profile")
    assert p.returncode == 0, p.stderr
    top = {f.name for f in out.glob("*.parquet")}
    assert not {"SystemProfileEvents.parquet", "SystemProfileMetadata.parquet", "CpuUsage.parquet",
                "HostMemUsage.parquet"} & top
    assert [d for d in out.iterdir() if (d / "ExecutionInfo.parquet").is_file()]  # the device profile stays
    assert load(out).metadata["neuron_explorer"]["lacks"] == ["system profile"]
    pf = run_dir / "pf_device_only"
    p = _explorer("view", "-d", str(run_dir), "--output-format", "perfetto", "--output-file", str(pf),
                  "--ignore-system-profile")
    assert p.returncode == 0 and not (pf / "system_profile.pftrace").exists()
    assert list(pf.glob("device_profile_model_*.pftrace"))
