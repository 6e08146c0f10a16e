"""`neuron-prof run --emulate-neuron`: the emulated device's timeline comes through the documented path, as on
Trainium (docs/trainium.md): the runtime's raw capture per process (``<dir>/<instance>_pid_<pid>/<ts>/``:
ntrace.pb, trace_info.pb, trace.json, the framework mapping), processed once by the stand-in ``neuron-explorer``
found on PATH into ``<dir>/parquet`` (the schema it declares in SchemaFields); the trace's device slices are
exactly the system profile's hardware rows; in both NEURON_LAUNCH_BLOCKING modes, "1" blocking every op and
leaving the framework mapping empty (documented as incompatible with it: issue 33), so no execution is tied to
an op."""

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
           "NEURON_PROF_EMULATE_COMPILE_SCALE": "0.1", "NEURON_PROF_EMULATE_DEVICE_SCALE": "100"}  # ms-long ops
    p = subprocess.run([sys.executable, "-m", "neuron_prof", "run", "-q", "--emulate-neuron", "--profile-dir",
                        str(tmp / "np"), "-o", str(tmp / "t.json"), str(tmp / "s.py")], cwd=tmp, env=env,
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    return tmp


def _events(tmp: Path) -> list[dict[str, object]]:
    return pq.read_table(tmp / "np" / "parquet" / "SystemProfileEvents.parquet").to_pylist()


def test_the_run_directory_holds_the_raw_capture_and_the_tables(capture: Path) -> None:
    (ts,) = list((capture / "np").glob("*_pid_*/*/"))
    assert {"ntrace.pb", "trace_info.pb", "trace.json"} <= {p.name for p in ts.iterdir()}
    assert not list(ts.glob("*.ntff"))  # the system profile only: no device profile, no HBM reserved
    blocking = capture.name.startswith("emu_explorer_1")
    mapping = orjson.loads(next(ts.glob("framework_mapping_*.json")).read_bytes())
    assert mapping["version"] == 1
    if blocking:
        assert mapping["data"] == []
    else:
        assert mapping["data"] and {"nrta_seq_id", "framework_op_exec_ids"} <= set(mapping["data"][0])
    out = capture / "np" / "parquet"  # processed once, for the whole run directory
    names = {f.stem for f in out.glob("*.parquet")}
    assert names >= {"SystemProfileEvents", "SystemProfileHbmUsage", "SystemProfileMetadata", "Metadata",
                     "SchemaFields"}
    assert not names & {"ActiveTime", "ExecutionInfo", "Summary"}  # device-profile tables need the device profile
    meta = pq.read_table(out / "Metadata.parquet").to_pylist()[0]
    assert meta["profile_schema_version"] == "7.4.0" and meta["is_simulation"] is True
    # the schema the profile declares is the one it has: every written column, with its type
    fields = pq.read_table(out / "SchemaFields.parquet").to_pylist()
    declared = {(f["table_name"], f["field_name"]) for f in fields}
    for f in out.glob("*.parquet"):
        assert {(f.stem, c) for c in pq.read_schema(f).names} <= declared, f.stem
    sysmeta = pq.read_table(out / "SystemProfileMetadata.parquet")
    assert sysmeta.schema.field("first_ts_ns").type == pa.string()  # documented: Unix-ns strings
    assert sysmeta.column("hbm_capacity_bytes")[0].as_py() > 0
    ev = pq.read_table(out / "SystemProfileEvents.parquet")
    assert ev.schema.field("flow_id").type == pa.list_(pa.string())
    # no framework event where no mapping ties an execution to its op
    assert set(ev.column("trace_event_source").to_pylist()) == ({"neuron_rt", "neuron_hw"} if blocking else
                                                                {"framework", "neuron_rt", "neuron_hw"})
    first = int(sysmeta.column("first_ts_ns")[0].as_py())
    assert min(ev.column("start_ts").to_pylist()) > 10**18 and first > 10**18  # the system profile: Unix ns
    rt = {r["name"] for r in ev.to_pylist() if r["trace_event_source"] == "neuron_rt"}
    hw = {r["name"] for r in ev.to_pylist() if r["trace_event_source"] == "neuron_hw"}
    assert rt == {"nrt_execute"} and hw == {"nc_exec_running", "dmem_buf_copyin", "dmem_buf_copyout"}  # documented


def test_device_slices_are_the_tables_rows(capture: Path) -> None:
    tr = neuron_prof.load(capture / "t.json")
    ev = _events(capture)
    hw = sorted((r["name"], r["start_ts"], r["duration_ns"]) for r in ev if r["trace_event_source"] == "neuron_hw")
    (ex,) = [int(t) for t in tr.track_ids(TrackKind.DEVICE) if tr.tracks[int(t)].name == "neuron:0 executions"]
    rows = np.flatnonzero(tr.slices.track == ex)
    got = sorted((tr.slice_name(int(r)), int(tr.slices.ts_ns[r]), int(tr.slices.dur_ns[r])) for r in rows)
    assert got == hw and {n for n, _, _ in hw} == {"nc_exec_running", "dmem_buf_copyin", "dmem_buf_copyout"}
    # each NEFF execution and its runtime call hang off the host op that issued it (one flow id)
    src_of = dict(zip(tr.flows.dst.tolist(), tr.flows.src.tolist()))
    rt_rows = [r for r in range(len(tr.slices)) if tr.slice_name(r) == "nrt_execute"]
    assert len(rt_rows) == sum(n == "nc_exec_running" for n, _, _ in hw)
    if capture.name.startswith("emu_explorer_1"):  # an empty mapping: the runtime's calls head their flows
        assert not any(r in src_of for r in rt_rows)
        assert all(tr.slice_name(src_of[int(r)]) == "nrt_execute" for r in rows.tolist()
                   if tr.slice_name(int(r)) == "nc_exec_running")
        assert any(f["kind"] == "device_unattributed" for f in tr.findings)
        return
    for r in [*rows.tolist(), *rt_rows]:
        host = src_of[int(r)]
        assert tr.slice_name(host).startswith("aten::") and tr.s(int(tr.slices.cat[host])) == "cpu_op"
    # the findings and the first screen saw the device with no option: idle gaps, busy time
    assert any(f["kind"] == "device_idle" for f in tr.findings)
    assert tr.metadata["runtime_profile"]["processed"] is True and not tr.metadata["runtime_profile"]["to_run"]


def test_launch_blocking_1_blocks_every_op(capture: Path) -> None:
    """NEURON_LAUNCH_BLOCKING=1: the host waits for each op's execution inside the op (the April NeuronStream);
    "0": ops return before their execution ends (asynchronous)."""
    blocking = capture.name.startswith("emu_explorer_1")
    ev = _events(capture)
    # the host op running when each execution was launched (the runtime call's start), from the host trace:
    # the framework mapping that would name it is empty under "1"
    tr = neuron_prof.load(capture / "t.json")
    sl = tr.slices
    ops = [(int(sl.ts_ns[r]), int(sl.ts_ns[r] + sl.dur_ns[r])) for r in range(len(sl))
           if tr.s(int(sl.cat[r])) == "cpu_op" and tr.slice_name(r).startswith("aten::")]
    calls = {r["id"]: r for r in ev if r["name"] == "nrt_execute"}
    pairs = []
    for hw in (r for r in ev if r["name"] == "nc_exec_running"):
        t = hw["start_ts"]
        inner = [o for o in ops if o[0] <= t <= o[1]]
        if inner:
            pairs.append((min(inner, key=lambda o: o[1] - o[0]), hw))
    assert pairs and calls
    waited = [end >= hw["end_ts"] - 5_000 for (_, end), hw in pairs]  # 5 µs: the clock sync's rounding
    assert all(waited) if blocking else not all(waited)


def test_summary_shows_device_busy_time_with_no_option(capture: Path) -> None:
    from neuron_prof.cli import main

    p = subprocess.run([sys.executable, "-m", "neuron_prof", "summary", str(capture / "t.json")],
                       capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 0, p.stderr
    assert "device busy" in p.stdout and "device busy n/a" not in p.stdout, p.stdout[:2000]
    assert main is not None
