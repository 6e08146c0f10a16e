"""`neuron-prof run --emulate-neuron`: the emulated device's timeline comes through the Neuron Explorer path, as
on Trainium (neuron-explorer-facts.md): a capture folder ``<dir>/<instance>_pid_<pid>/<ts>/`` with trace.json,
the framework mapping and the processed tables in ``<ts>/parquet`` (schema 7.4.0), and the trace's device
slices are exactly what those tables hold; in both NEURON_LAUNCH_BLOCKING modes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import neuron_prof
from neuron_prof.model import TrackKind

REPO = Path(__file__).resolve().parents[1]
SCRIPT = """
import torch
m = torch.nn.Linear(32, 32).to("neuron")
x = torch.randn(8, 32).to("neuron")
for _ in range(3):
    y = m(x)
    torch.sort(y, dim=-1)  # a CPU fallback: copies to and from the host
    y.sum().item()
"""


@pytest.fixture(scope="module", params=["0", "1"], ids=["async", "blocking"])
def capture(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp(f"emu_explorer_{request.param}")
    (tmp / "s.py").write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NEURON_LAUNCH_BLOCKING": request.param,
           "NEURON_PROF_EMULATE_COMPILE_SCALE": "0.1"}
    p = subprocess.run([sys.executable, "-m", "neuron_prof", "run", "-q", "--emulate-neuron", "-o",
                        str(tmp / "t.json"), str(tmp / "s.py")], cwd=tmp, env=env, capture_output=True, text=True,
                       timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    return tmp


def _tables(tmp: Path) -> Path:
    (ts,) = list((tmp / "neuron_profile").glob("*_pid_*/*/"))
    return ts


def test_the_capture_folder_holds_what_the_runtime_and_explorer_write(capture: Path) -> None:
    ts = _tables(capture)
    assert (ts / "trace.json").is_file() and len(list(ts.glob("framework_mapping_*.json"))) == 1
    mapping = orjson.loads(next(ts.glob("framework_mapping_*.json")).read_bytes())
    assert mapping["version"] == 1 and mapping["data"] and {"nrta_seq_id", "framework_op_exec_ids"} <= set(
        mapping["data"][0])
    out = ts / "parquet"
    names = {f.stem for f in out.glob("*.parquet")}
    assert names >= {"SystemProfileEvents", "ActiveTime", "CcOp", "SystemProfileHbmUsage", "SystemProfileMetadata",
                     "Metadata"}
    meta = pq.read_table(out / "Metadata.parquet").to_pylist()[0]
    assert meta["profile_schema_version"] == "7.4.0" and meta["is_simulation"] is True
    sysmeta = pq.read_table(out / "SystemProfileMetadata.parquet")
    assert sysmeta.schema.field("first_ts_ns").type == pa.string()  # documented: Unix-ns strings
    assert sysmeta.column("hbm_capacity_bytes")[0].as_py() > 0
    ev = pq.read_table(out / "SystemProfileEvents.parquet")
    assert ev.schema.field("flow_id").type == pa.list_(pa.string())
    assert ev.schema.field("start_ts").type == pa.int64()
    assert set(ev.column("trace_event_source").to_pylist()) == {"framework", "neuron_rt", "neuron_hw"}
    rt = ev.filter(pa.compute.equal(ev.column("trace_event_source"), "neuron_rt"))
    assert set(rt.column("name").to_pylist()) == {"nrt_execute"}


def test_device_slices_are_the_tables_rows(capture: Path) -> None:
    tr = neuron_prof.load(capture / "t.json")
    out = _tables(capture) / "parquet"
    ev = pq.read_table(out / "SystemProfileEvents.parquet").to_pylist()
    hw = sorted((r["name"], r["start_ts"], r["duration_ns"]) for r in ev if r["trace_event_source"] == "neuron_hw")
    (ex,) = [int(t) for t in tr.track_ids(TrackKind.DEVICE) if tr.tracks[int(t)].name == "neuron:0 executions"]
    rows = np.flatnonzero(tr.slices.track == ex)
    got = sorted((tr.slice_name(int(r)), int(tr.slices.ts_ns[r]), int(tr.slices.dur_ns[r])) for r in rows)
    assert got == hw and any(n == "nc_exec_running" for n, _, _ in hw)
    assert {n for n, _, _ in hw} >= {"aten::sort (copy to host)", "aten::sort (copy to device)"}
    active = pq.read_table(out / "ActiveTime.parquet").to_pylist()
    busy = {e: sum(r["duration_ns"] for r in active if r["engine"] == e) for e in {r["engine"] for r in active}}
    assert tr.metadata["neuron_explorer"]["active_time_ns"] == {f"0:{e}": ns for e, ns in busy.items()}
    # each NEFF execution and its runtime call hang off the host op that issued it (one flow id)
    src_of = dict(zip(tr.flows.dst.tolist(), tr.flows.src.tolist()))
    rt_rows = [r for r in range(len(tr.slices)) if tr.slice_name(r) == "nrt_execute"]
    assert len(rt_rows) == sum(n == "nc_exec_running" for n, _, _ in hw)
    for r in [*rows.tolist(), *rt_rows]:
        host = src_of[int(r)]
        assert tr.slice_name(host).startswith("aten::") and tr.s(int(tr.slices.cat[host])) == "cpu_op"
    # the findings saw the device: its idle gaps come from these rows
    assert any(f["kind"] == "device_idle" for f in tr.findings)
