"""A job's run directory processed once, as the docs do it (``neuron-explorer view -d RUN_DIR --output-format
parquet --output-file RUN_DIR/parquet``: the processes of a job combine): each ``<instance>_pid_<pid>`` folder
loads as its process (its trace.json, its rows of the run-wide tables), the run directory as the job. Both
torch-neuronx layouts: ``<pid folder>/<timestamp>/trace.json`` (documented export_trace) and the April flat
``<pid folder>/pytorch_trace.json``."""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neuron_prof.cli import main
from neuron_prof.loaders import load
from neuron_prof.loaders.explorer.reader import EXPLORER_KEY
from neuron_prof.model import Meta
from tests.fakes.explorer_profile import write_profile

TS = "20261201_120000"
PIDS = {0: ("i-0abc", 1000), 1: ("i-0def", 1001)}


@pytest.fixture(scope="module")
def host_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """trace.json of a real torch.profiler run: three x @ x."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(32, 32)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            x @ x
    path = tmp_path_factory.mktemp("host") / "trace.json"
    prof.export_chrome_trace(str(path))
    return path


def _run_dir(root: Path, host_json: Path, flat: bool = False) -> Path:
    """RUN_DIR with two pid folders (ranks 0 and 1) and RUN_DIR/parquet: both processes' system-profile rows in
    one table set, rank 0's device profile."""
    run = root / "run"
    parts: dict[str, list[pa.Table]] = {}
    for rank, (inst, pid) in PIDS.items():
        doc = orjson.loads(host_json.read_bytes())
        doc["distributedInfo"] = {"backend": "gloo", "rank": rank, "world_size": 2}
        folder = run / f"{inst}_pid_{pid}" / ("" if flat else TS)
        folder.mkdir(parents=True)
        (folder / "ntrace.pb").write_bytes(b"\0")  # the runtime's own files stay where they were written
        (folder / ("pytorch_trace.json" if flat else "trace.json")).write_bytes(orjson.dumps(doc))
        host = load(folder / ("pytorch_trace.json" if flat else "trace.json"))
        mm = [r for r in range(len(host.slices)) if host.slice_name(r) == "aten::mm"]
        ops = [("aten::mm", int(host.slices.ts_ns[r]), int(host.tracks[int(host.slices.track[r])].tid)) for r in mm]
        tables = root / f"tables{rank}"
        write_profile(tables, ops=ops, pid=pid, instance=inst, t0=ops[0][1] - 1_000_000, device=rank == 0)
        for f in sorted(tables.glob("*.parquet")):
            parts.setdefault(f.name, []).append(pq.read_table(f))
    (run / "parquet").mkdir()
    for name, ts in parts.items():  # system tables: every process's rows; the others: the one written
        keep = ts if "instance_id" in ts[0].column_names and name != "DeviceProfileList.parquet" else ts[:1]
        pq.write_table(pa.concat_tables(keep, promote_options="default"), run / "parquet" / name)
    return run


@pytest.mark.parametrize("flat", [False, True], ids=["export_trace", "april"])
def test_each_pid_folder_loads_its_rows_of_the_run_wide_tables(tmp_path: Path, host_json: Path, flat: bool) -> None:
    run = _run_dir(tmp_path, host_json, flat)
    for rank, (inst, pid) in PIDS.items():
        pid_dir = run / f"{inst}_pid_{pid}"
        for where in ([pid_dir] if flat else [pid_dir, pid_dir / TS]):
            tr = load(where)
            ex = tr.metadata[EXPLORER_KEY]
            assert tr.rank == rank and tr.metadata[Meta.SOURCE_FORMAT] == "neuron_capture"
            assert ex["framework_join"]["joined"] == 3 and ex["events"]["neuron_hw"] == 3  # its own rows only
            assert len([r for r in range(len(tr.slices)) if tr.slice_name(r) == "aten::mm"]) == 3
            assert ("device_clock" in ex) == (rank == 0)  # rank 0's device profile, not given to rank 1
            if rank == 0:
                assert ex["device_clock"]["executions_paired"] == 3 and ex["active_time_ns"]


def test_the_run_directory_is_the_job(tmp_path: Path, host_json: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_dir(tmp_path, host_json)
    assert main(["summary", str(run), "--workers", "0"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if ln.strip()[:1].isdigit()]
    assert "2 rank(s)" in out and [r[0] for r in rows] == ["0", "1"]


def test_an_unprocessed_run_says_the_run_directory_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                           ) -> None:
    pid_dir = tmp_path / "run" / "i-0abc_pid_7" / TS
    pid_dir.mkdir(parents=True)
    (pid_dir / "ntrace.pb").write_bytes(b"\0")
    assert main(["summary", str(pid_dir)]) == 2
    run = tmp_path / "run"
    assert f"neuron-explorer view -d {run} --output-format parquet --output-file {run}/parquet" in \
        capsys.readouterr().err


SYSTEM = {"SystemProfileEvents", "SystemProfileMetadata", "SystemProfileHbmUsage", "CpuUsage", "HostMemUsage",
          "Warning", "SchemaFields", "Metadata"}


def test_several_device_profiles_one_per_subfolder(tmp_path: Path, host_json: Path) -> None:
    """Both processes took a device profile: the run-wide folder holds the system tables, each device profile
    its own sub-folder (Metadata, DeviceProfileList, device tables); each pid folder gets its own."""
    run = _run_dir(tmp_path, host_json)
    out = run / "parquet"
    for f in out.glob("*.parquet"):
        f.unlink()
    for rank in PIDS:
        sub = out / f"profile_nc_0_rank{rank}"
        sub.mkdir()
        src = tmp_path / f"tables{rank}"
        if rank == 1:  # rewrite rank 1 with its device profile this time
            inst, pid = PIDS[1]
            ops = _ops_of(tmp_path / "tables1")
            for f in src.glob("*.parquet"):
                f.unlink()
            write_profile(src, ops=ops, pid=pid, instance=inst, t0=ops[0][1] - 1_000_000, device_t0=5 * 10**12,
                          drift=2e-4)
        for f in sorted(src.glob("*.parquet")):
            table = f.name.split(".")[0].split("_")[0]
            if table not in SYSTEM or table == "Metadata":
                pq.write_table(pq.read_table(f), sub / f.name)
    for name in sorted({f.name for r in PIDS for f in (tmp_path / f"tables{r}").glob("*.parquet")}):
        table = name.split(".")[0].split("_")[0]
        if table in SYSTEM:
            found = [tmp_path / f"tables{r}" / name for r in PIDS]
            ts = [pq.read_table(f) for f in found if f.exists()]
            keep = ts if "instance_id" in ts[0].column_names else ts[:1]
            pq.write_table(pa.concat_tables(keep, promote_options="default"), out / name)
    for rank, (inst, pid) in PIDS.items():
        ex = load(run / f"{inst}_pid_{pid}").metadata[EXPLORER_KEY]
        assert ex["device_clock"]["executions_paired"] == 3 and ex["device_profile_folders"] == [
            f"profile_nc_0_rank{rank}"]
        assert ex["active_time_ns"] == {"0:tensor": 900_000, "0:vector": 350_000}
    whole = load(out)
    ex = whole.metadata[EXPLORER_KEY]
    assert len(ex["device_clock"]["profiles"]) == 2
    assert {p.name for p in whole.processes if p.name.startswith("neuron:")} == {"neuron:1000:0", "neuron:1001:0"}


def _ops_of(folder: Path) -> list[tuple[str, int, int]]:
    t = pq.read_table(sorted(folder.glob("SystemProfileEvents*.parquet"))[0]).to_pylist()
    t += pq.read_table(sorted(folder.glob("SystemProfileEvents*.parquet"))[1]).to_pylist()
    return [(r["name"], r["start_ts"], r["thread_id"]) for r in t if r["trace_event_source"] == "framework"
            and r["name"] == "aten::mm"]
