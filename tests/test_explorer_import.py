"""Neuron Explorer Parquet profile folders (written to the documented schema 7.4.0) loaded as traces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neuron_prof.cli import main
from neuron_prof.errors import TraceFormatError, TraceLoadError
from neuron_prof.loaders import load
from neuron_prof.loaders.explorer.reader import EXPLORER_KEY
from neuron_prof.model import Arg, Meta, TrackKind
from tests.fakes.explorer_profile import HBM_CAPACITY, PID, T0, TID, Written, write_profile


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Written]:
    folder = tmp_path_factory.mktemp("explorer") / "profile"
    return folder, write_profile(folder)


def _names(trace, kind: str) -> dict[str, int]:
    return {trace.tracks[int(i)].name: int(i) for i in trace.track_ids(kind)}


def test_device_busy_time_per_engine_and_core(profile) -> None:
    folder, w = profile
    tr = load(folder)
    dev = _names(tr, TrackKind.DEVICE)
    for key, busy in w.busy_ns.items():
        core, engine = key.split(":")
        rows = np.flatnonzero(tr.slices.track == dev[f"neuron:{core} {engine} engine"])
        assert int(tr.slices.dur_ns[rows].sum()) == busy
        assert {tr.slice_name(int(r)) for r in rows} == {engine}
    assert tr.metadata[EXPLORER_KEY]["active_time_ns"] == w.busy_ns
    # the device clock's rows are placed on the host clock: each engine interval where the fixture put it
    eng = np.flatnonzero(np.isin(tr.slices.track, [dev["neuron:0 tensor engine"], dev["neuron:0 vector engine"]]))
    assert sorted(zip(tr.slices.ts_ns[eng].tolist(), tr.slices.dur_ns[eng].tolist())) == sorted(
        (a, d) for _, a, d in w.busy)
    # hardware executions on the logical core's device track, runtime events by logical core on the host
    ex = np.flatnonzero(tr.slices.track == dev["neuron:0 executions"])
    assert [tr.slice_name(int(r)) for r in ex] == ["nc_exec_running"] * 3
    assert tr.processes[tr.tracks[dev["neuron:0 executions"]].process].kind == "device"
    other = _names(tr, TrackKind.OTHER)
    assert {"neuron_rt nc 0", "PrivateUse1 driver stream 3"} <= set(other)
    assert tr.metadata[Meta.CLOCK] == "unix" and tuple(tr.metadata[Meta.WALL]) == (T0, T0 + 10_000_000)


def test_host_ops_link_to_their_runtime_executions(profile) -> None:
    folder, w = profile
    tr = load(folder)
    pairs = [(tr.slice_name(int(a)), tr.slice_name(int(b))) for a, b in zip(tr.flows.src, tr.flows.dst)]
    assert sorted(pairs) == sorted(w.links + w.executions)  # op -> runtime (flow id) -> its execution
    first = min(int(z) for z in tr.flows.dst)  # the first runtime execution: row 1 of SystemProfileEvents
    assert tr.slice_args(first) == {"id": 1, "nc_idx": 0, "worker_gid": 0}  # runtime events: no physical core
    mm0 = next(int(a) for a in tr.flows.src if tr.slice_name(int(a)) == "aten::mm#0")
    host = tr.tracks[int(tr.slices.track[mm0])]
    assert (host.kind, host.tid, tr.processes[host.process].pid) == (TrackKind.THREAD, TID, PID)
    assert tr.processes[host.process].name == f"i-0abc pid {PID}"
    # each link joins the op to the execution its flow id names (written 150 µs after the op starts)
    assert all(int(tr.slices.ts_ns[int(b)]) - int(tr.slices.ts_ns[int(a)]) == 150_000
               for a, b in zip(tr.flows.src, tr.flows.dst) if tr.slice_name(int(b)) == "nrt_execute")
    driver = _names(tr, TrackKind.OTHER)["PrivateUse1 driver stream 3"]
    r = int(np.flatnonzero(tr.slices.track == driver)[0])
    assert tr.slice_name(r) == "neuron::copy_h2d" and tr.s(int(tr.slices.cat[r])) == "privateuse1_driver"


def test_added_to_a_capture_the_framework_events_join_its_host_ops(profile) -> None:
    """A capture already holds the framework's ops (torch.profiler's trace): the profile's dispatch events are
    not added again; the runtime executions link to the host ops the join names."""
    from neuron_prof.loaders.explorer.reader import add_explorer
    from neuron_prof.model import TraceBuilder

    folder, w = profile
    b = TraceBuilder()
    thread = b.thread_track(PID, TID, "main")
    ops = {f"aten::mm#{k}": b.add_slice(thread, T0 + 1_000_000 + k * 2_000_000 - 50_000, 400_000,
                                         f"aten::mm#{k}", "cpu_op") for k in range(3)}
    asked: list[tuple[int, str, int]] = []

    def host_row(tid, names, name_idx, ts):  # the batch join (explorer.HostRow)
        asked.extend((int(t), names[int(k)], int(s)) for t, k, s in zip(tid, name_idx, ts))
        return np.asarray([ops.get(names[int(k)], -1) for k in name_idx], dtype=np.int64)

    warnings, wall = add_explorer(b, folder, host_row)
    tr = b.build()
    # every framework event is looked up, the driver event too; the one the host lacks is added
    assert sorted(asked) == sorted([(TID, f"aten::mm#{k}", T0 + 1_000_000 + k * 2_000_000) for k in range(3)]
                                   + [(TID, "neuron::copy_h2d", T0 + 500_000)])
    names = [tr.slice_name(i) for i in range(len(tr.slices))]
    assert names.count("aten::mm#0") == 1 and names.count("neuron::copy_h2d") == 1  # not added twice, not lost
    pairs = [(tr.slice_name(int(a)), tr.slice_name(int(z))) for a, z in zip(tr.flows.src, tr.flows.dst)]
    launch = [(a, z) for a, z in zip(tr.flows.src.tolist(), tr.flows.dst.tolist())
              if tr.slice_name(z) == "nrt_execute"]
    assert sorted(pairs) == sorted(w.links + w.executions) and {a for a, _ in launch} == set(ops.values())
    assert wall == (T0, T0 + 10_000_000) and warnings == w.warnings
    assert tr.metadata["device_memory_bytes"] == HBM_CAPACITY


def test_collectives_bytes_algorithm_and_bandwidths(profile) -> None:
    folder, w = profile
    tr = load(folder)
    rows = tr.slices_on(TrackKind.COLLECTIVE)
    assert len(rows) == len(w.collectives)
    for r, c in zip(sorted(rows.tolist(), key=lambda r: int(tr.slices.ts_ns[r])), w.collectives):
        a = tr.slice_args(r)
        assert tr.slice_name(r) == c["operation"]
        assert (int(tr.slices.ts_ns[r]), int(tr.slices.dur_ns[r])) == (c["start_ts"], c["duration_ns"])
        assert (a[Arg.BYTES_IN], a[Arg.BYTES_OUT], a["algorithm"], a[Arg.RANKS]) == (
            c["input_size"], c["output_size"], c["algorithm"], c["replica_group"])
        assert a[Arg.ALGBW] == pytest.approx(c["algbw"] / 1e9) and a[Arg.BUSBW] == pytest.approx(c["busbw"] / 1e9)


def test_hbm_counters_capacity_summary_and_warnings(profile) -> None:
    folder, w = profile
    tr = load(folder)
    mem = _names(tr, TrackKind.MEMORY)
    total = mem["neuron device 0 HBM 0 total"]
    m = tr.counters.track == total
    assert list(zip(tr.counters.ts_ns[m].tolist(), tr.counters.value[m].tolist())) == w.hbm_total
    assert "neuron device 0 HBM 0 tensors" in _names(tr, TrackKind.COUNTER)  # the parts are no peaks of their own
    assert "neuron device 0 HBM 0 collectives" not in _names(tr, TrackKind.COUNTER)  # all zero: left out
    assert tr.metadata["device_memory_bytes"] == HBM_CAPACITY
    ex = tr.metadata[EXPLORER_KEY]
    assert ex["summary"] == pytest.approx(w.summary)  # f32 metrics as written
    assert ex["profile_schema_version"] == "7.4.0" and ex["instance_type"] == "trn2.48xlarge"
    assert ex["instructions"]["per_engine"] == {e: {"instructions": c, "time_ns": ns}
                                                for e, (c, ns) in w.instructions.items()}
    assert ex["executions"] == w.neffs
    assert tr.metadata[Meta.WARNINGS] == w.warnings


def test_instruction_table_is_read_three_columns_at_a_time(profile, monkeypatch: pytest.MonkeyPatch) -> None:
    folder, _ = profile
    asked: list[tuple[str, tuple[str, ...]]] = []
    real_iter, real_read = pq.ParquetFile.iter_batches, pq.read_table

    def spy_iter(self, *a, columns=None, **kw):
        asked.append(("iter", tuple(columns or ())))
        return real_iter(self, *a, columns=columns, **kw)

    def spy_read(source, *a, columns=None, **kw):
        asked.append((Path(source).name, tuple(columns or ())))
        return real_read(source, *a, columns=columns, **kw)

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy_iter)
    monkeypatch.setattr(pq, "read_table", spy_read)
    load(folder)
    assert not [n for n, _ in asked if n.startswith("Instruction")]  # never read as a table
    cols = ("engine", "opcode", "duration_ns", "raw_framework_id", "stack_frame_ids", "start_ts")
    assert [c for n, c in asked if n == "iter"] == [cols] * 3  # 3 split parts, 6 of its 57 documented fields
    assert all(cols for _, cols in asked)  # every read names its columns


def test_missing_tables_load_what_is_there(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    write_profile(folder)
    for f in [*folder.glob("ActiveTime*.parquet"), folder / "Metadata.parquet"]:
        f.unlink()
    tr = load(folder)
    assert not [n for n in _names(tr, TrackKind.DEVICE) if "engine" in n]
    assert "neuron:0 executions" in _names(tr, TrackKind.DEVICE)
    assert any("no Metadata table" in w for w in tr.metadata[Meta.WARNINGS])


def test_corrupt_parquet_is_a_clear_error_and_a_wrong_type_leaves_its_view_out(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "p"
    write_profile(folder)
    (folder / "CcOp.parquet").write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(TraceFormatError, match=r"CcOp\.parquet: not a readable Parquet file"):
        load(folder)
    assert main(["check", str(folder)]) == 2
    assert "not a readable Parquet file" in capsys.readouterr().err
    write_profile(folder)
    raw = bytearray((folder / "CcOp.parquet").read_bytes())  # footer intact, data pages overwritten
    raw[8:200] = b"\xff" * 192
    (folder / "CcOp.parquet").write_bytes(bytes(raw))
    with pytest.raises(TraceFormatError, match=r"CcOp\.parquet: not a readable Parquet file"):
        load(folder)
    write_profile(folder)
    # text where the schema has a number: that view is left out, named; the rest loads
    pq.write_table(pa.table({"start_ts": ["yesterday"], "end_ts": ["today"], "engine": ["tensor"]}),
                   folder / "ActiveTime_0.parquet")
    tr = load(folder)
    assert not [n for n in _names(tr, TrackKind.DEVICE) if "engine" in n]
    assert any("ActiveTime.start_ts" in m and "engine busy time not shown" in m for m in tr.metadata[Meta.WARNINGS])
    assert len(tr.slices_on(TrackKind.COLLECTIVE)) == 3
    pq.write_table(pa.table({"engine": ["tensor"]}), folder / "ActiveTime_0.parquet")
    tr = load(folder)
    assert any("ActiveTime.start_ts" in m for m in tr.metadata[Meta.WARNINGS])


def test_a_full_runtime_ring_buffer_is_a_warning(profile, monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime keeps NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC events per core (1,000,000) and overwrites
    the oldest: a core that holds that many lost the start of the capture."""
    from neuron_prof.loaders.explorer import _events as _explorer_events

    folder, _ = profile
    assert not any("ring buffer size" in w for w in load(folder).metadata[Meta.WARNINGS])
    monkeypatch.setattr(_explorer_events, "RING_EVENTS", 8)  # core 0: 5 runtime (3 calls, 2 copies) + 3 hardware
    warns = [w for w in load(folder).metadata[Meta.WARNINGS] if "ring buffer size" in w]
    assert len(warns) == 1 and "NeuronCore 0 holds 8 runtime events" in warns[0]


def test_runtime_output_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``<dir>/<instance>_pid_<pid>/<timestamp>/``: the processed profile below loads; a raw capture (NTFF,
    ntrace.pb) says the exact neuron-explorer command; two processed profiles below are ambiguous."""
    pid_dir = tmp_path / "output" / f"i-0abc_pid_{PID}"
    write_profile(pid_dir / "20261201_120000")
    assert load(tmp_path / "output").metadata[EXPLORER_KEY]["collectives"] == 3
    raw = tmp_path / "raw" / f"i-0abc_pid_{PID}" / "20261201_120000"
    raw.mkdir(parents=True)
    (raw / "profile_nc_0_session_1.ntff").write_bytes(b"\0")
    (raw / "trace.json").write_text("{}")
    assert main(["check", str(tmp_path / "raw")]) == 2
    err = capsys.readouterr().err
    run = tmp_path / "raw"  # the docs process the run directory: the processes of a job combine
    assert f"neuron-explorer view -d {run} --output-format parquet --output-file {run}/parquet" in err
    write_profile(pid_dir / "20261201_130000")
    with pytest.raises(TraceLoadError, match="holds 2 processed Neuron Explorer profiles"):
        load(tmp_path / "output")


def test_folder_without_tables_says_so(tmp_path: Path) -> None:
    (tmp_path / "slices.parquet").write_bytes(b"")
    with pytest.raises(TraceLoadError, match="nor a Neuron Explorer profile"):
        load(tmp_path)


def test_summary_subprocess_reads_the_folder(profile) -> None:
    folder, _ = profile
    p = subprocess.run([sys.executable, "-m", "neuron_prof", "summary", str(folder)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "Device busy" in p.stdout and "allgather" in p.stdout.lower()
    assert "ring buffer full" in p.stderr  # Explorer's Warning rows are load warnings


def test_a_device_execution_links_from_the_runtime_call_that_holds_it() -> None:
    """No flow id reaches hardware events: each links from the runtime event on its logical core that
    holds it, even when a short runtime call started inside the execution; one nothing holds stays alone."""
    from neuron_prof.loaders.explorer._events import _hardware_links
    from neuron_prof.model import TraceBuilder

    b = TraceBuilder()
    tr = b.thread_track(1, 1)
    events = ((0, 1000, "nrt_execute"), (200, 10, "nrt_tensor_write"), (300, 600, "nc_exec_running"),
              (5000, 10, "nc_exec_running"), (0, 1000, "nrt_execute"), (100, 50, "nc_exec_running"))
    rows = [b.add_slice(tr, ts, d, n) for ts, d, n in events]
    kind = np.array([2, 2, 3, 3, 2, 3])
    nc = np.array([0, 0, 0, 0, 1, 1])
    start = np.array([0, 200, 300, 5000, 0, 100])
    dur = np.array([1000, 10, 600, 10, 1000, 50])
    _hardware_links(b, kind, nc, start, dur, np.asarray(rows), set())
    assert sorted(zip(b.f_src, b.f_dst)) == [(rows[0], rows[2]), (rows[4], rows[5])]
