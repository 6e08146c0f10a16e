"""A runtime output folder (``<instance>_pid_<pid>/<timestamp>/`` with torch.profiler's trace.json and the
processed Neuron Explorer tables) loads as ONE trace: host ops from a real torch.profiler run, device work
from tables written to the documented schema, joined both ways the facts allow."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from neuron_prof.cli import main
from neuron_prof.loaders import load
from neuron_prof.loaders.explorer.reader import EXPLORER_KEY
from neuron_prof.model import Meta, TrackKind
from tests.fakes.explorer_profile import write_profile

TS = "20261201_120000"


@pytest.fixture(scope="module")
def host_json(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """trace.json of a real torch.profiler run: three x @ x under autograd (aten::mm: a Sequence number)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(32, 32, requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            (x @ x).sum()
    path = tmp_path_factory.mktemp("host") / "trace.json"
    prof.export_chrome_trace(str(path))
    return path


def _mm_events(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e.get("name") == "aten::mm" and e.get("cat") == "cpu_op"]


def _capture(root: Path, host_json: Path, *, rank: int | None = None, thread_id: int | None = None,
             shift_ns: int = 0, driver: list[tuple[int, int, int]] | None = None,
             tables: str = ".", framework: bool = True,
             runtime_mapping: list[tuple[int, int]] | None = None) -> tuple[Path, list[tuple[str, int, int]]]:
    """``root/i-0abc_pid_<pid>/<TS>/`` holding trace.json (with `rank` in distributedInfo, and one Kineto
    ``privateuse1_driver`` event per (nrt_sequence_id, mm index, mapping seq_nr) of `driver` plus its
    framework_mapping file) and the processed tables in `tables` (relative to ``<TS>``) whose framework events
    are the trace's aten::mm ops (Explorer's thread id `thread_id` if given, start shifted by `shift_ns`)."""
    doc = orjson.loads(host_json.read_bytes())
    mm = _mm_events(doc)
    pid = int(mm[0]["pid"])
    folder = root / f"i-0abc_pid_{pid}" / TS
    folder.mkdir(parents=True)
    (folder / "ntrace.pb").write_bytes(b"\0")  # the runtime's own files (RUNTIME mode), before processing
    (folder / "trace_info.pb").write_bytes(b"\0")
    if rank is not None:
        doc["distributedInfo"] = {"backend": "gloo", "rank": rank, "world_size": 2}
    if driver:
        mapping = []
        for nrt, k, seq_nr in driver:  # documented shapes: the Oct docs' driver event, the April mapping file
            doc["traceEvents"].append({"ph": "X", "cat": "privateuse1_driver", "name": f"nrt_execute {nrt}",
                                       "pid": pid, "tid": 77, "ts": mm[k]["ts"] + 0.5, "dur": 3.0,
                                       "args": {"nrt_sequence_id": nrt}})
            mapping.append({"nrta_seq_id": nrt, "framework_op_exec_ids": [{"seq_nr": seq_nr, "th_id": 1,
                                                                           "stream_id": 0}]})
        doc_map = orjson.dumps({"version": 1, "data": mapping})
        (folder / "framework_mapping_1764000000.json").write_bytes(doc_map)
    (folder / "trace.json").write_bytes(orjson.dumps(doc))
    host = load(folder / "trace.json")
    rows = [r for r in range(len(host.slices)) if host.slice_name(r) == "aten::mm"]
    tid = [int(host.tracks[int(host.slices.track[r])].tid) if thread_id is None else thread_id for r in rows]
    ops = [("aten::mm", int(host.slices.ts_ns[r]) + shift_ns, t) for r, t in zip(rows, tid)]
    write_profile((folder / tables).resolve(), ops=ops, pid=pid, t0=min(t for _, t, _ in ops) - 1_000_000,
                  framework=framework)
    if runtime_mapping:  # (nrta_seq_id, seq_nr): the April mapping file for the runtime calls
        data = [{"nrta_seq_id": n, "framework_op_exec_ids": [{"seq_nr": q, "th_id": 1, "stream_id": 0}]}
                for n, q in runtime_mapping]
        (folder / "framework_mapping_1764000000.json").write_bytes(orjson.dumps({"version": 1, "data": data}))
    return folder.parent, ops


def _mm_rows(tr) -> list[int]:
    return [r for r in range(len(tr.slices)) if tr.slice_name(r) == "aten::mm"]


def test_capture_folder_is_one_trace(tmp_path: Path, host_json: Path) -> None:
    pid_dir, ops = _capture(tmp_path, host_json)
    host = load(host_json)
    tr = load(pid_dir)
    # host ops once (the profile's framework events are trace.json's ops, not added again)
    assert len(_mm_rows(tr)) == len(_mm_rows(host)) == len(ops) == 3
    # each runtime execution links from the very host op on the Kineto thread, 150 µs after it starts
    pairs = {int(a): int(z) for a, z in zip(tr.flows.src, tr.flows.dst)
             if tr.slice_name(int(z)) == "nrt_execute"}
    assert sorted(pairs) == _mm_rows(tr)
    for a, z in pairs.items():
        t = tr.tracks[int(tr.slices.track[a])]
        assert t.kind == TrackKind.THREAD and t.tid == ops[0][2]
        assert int(tr.slices.ts_ns[z]) - int(tr.slices.ts_ns[a]) >= 150_000  # its call (one core: in turn)
    calls = [int(tr.slices.ts_ns[pairs[a]]) for a in sorted(pairs)]
    assert calls == sorted(calls)  # op k -> runtime call k
    # device tracks and the runtime's per-core track in the same host process as the ops
    assert "neuron:0 tensor engine" in {tr.tracks[int(i)].name for i in tr.track_ids(TrackKind.DEVICE)}
    rt = next(t for t in tr.tracks if t.name == "neuron_rt nc 0")
    op_track = tr.tracks[int(tr.slices.track[_mm_rows(tr)[0]])]
    assert tr.processes[rt.process].pid == tr.processes[op_track.process].pid
    md = tr.metadata
    assert md[Meta.CLOCK] == "unix" and md[Meta.SOURCE_FORMAT] == "neuron_capture"
    assert md[EXPLORER_KEY]["framework_join"]["joined"] == 3 and md[EXPLORER_KEY]["collectives"] == 3
    wall = md[Meta.WALL]
    assert wall[0] <= int(host.slices.ts_ns.min()) and wall[1] >= ops[-1][1] + 1_500_000
    # as a user runs it: the folder converted by a neuron-prof process keeps the ops, the device and the links
    out = tmp_path / "one.pftrace"
    p = subprocess.run([sys.executable, "-m", "neuron_prof", "convert", str(pid_dir), str(out)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    conv = load(out)
    assert len(_mm_rows(conv)) == 3 and len(conv.flows.src) == len(tr.flows.src)
    # the tables may sit below the capture folder (<ts>/parquet, what neuron-prof's capture asks for) or beside it
    for where, tables in (("below", "parquet"), ("beside", f"../{TS}_parquet")):
        other, _ = _capture(tmp_path / where, host_json, tables=tables)
        assert (other / TS / tables / "Metadata.parquet").resolve().exists()
        assert load(other).metadata[EXPLORER_KEY]["framework_join"]["joined"] == 3
    # but a trace.json that merely sits above a processed folder (neuron-prof's own output) is not its capture
    alone = tmp_path / "cwd"
    write_profile(alone / "profile_pq")
    shutil.copy(host_json, alone / "trace.json")
    assert load(alone / "profile_pq").metadata[Meta.SOURCE_FORMAT] == "neuron_explorer"


def test_framework_events_join_by_name_and_time_when_thread_ids_differ(tmp_path: Path,
                                                                       host_json: Path) -> None:
    """Explorer's thread id need not be Kineto's: the join falls back to name and start; an event that starts
    elsewhere is not forced onto an op (it is added from the profile, and the load says so)."""
    pid_dir, _ = _capture(tmp_path / "a", host_json, thread_id=999_999)
    tr = load(pid_dir)
    join = tr.metadata[EXPLORER_KEY]["framework_join"]
    assert (join["joined"], join["joined_on_other_thread"]) == (3, 3) and len(_mm_rows(tr)) == 3
    assert not any("framework events" in w for w in tr.metadata[Meta.WARNINGS])  # the driver event: added
    pid_dir, _ = _capture(tmp_path / "b", host_json, shift_ns=5_000)
    tr = load(pid_dir)
    assert tr.metadata[EXPLORER_KEY]["framework_join"]["joined"] == 0 and len(_mm_rows(tr)) == 6
    assert any("4 of 4 framework events" in w for w in tr.metadata[Meta.WARNINGS])


def test_driver_events_link_through_the_framework_mapping(tmp_path: Path, host_json: Path) -> None:
    """``seq_nr`` equal to the op's Sequence number, one above it (peek() after the op made its autograd
    node), and a ``th_id`` that is RecordFunction's counter (1), not the OS thread id: all three link to the
    op that was running; an unknown seq_nr links nowhere."""
    doc = orjson.loads(host_json.read_bytes())
    seq = [int(e["args"]["Sequence number"]) for e in _mm_events(doc)]
    pid_dir, _ = _capture(tmp_path, host_json, driver=[(1, 0, seq[0]), (2, 1, seq[1] + 1), (3, 2, 10**9)])
    tr = load(pid_dir)
    src = {tr.slice_name(int(z)): int(a) for a, z in zip(tr.flows.src, tr.flows.dst)
           if tr.slice_name(int(z)).startswith("nrt_execute ")}
    assert sorted(src) == ["nrt_execute 1", "nrt_execute 2"]
    for name, k in (("nrt_execute 1", 0), ("nrt_execute 2", 1)):
        a = src[name]
        assert tr.slice_args(a)["Sequence number"] == seq[k]
        d = next(r for r in range(len(tr.slices)) if tr.slice_name(r) == name)
        a0, a1 = int(tr.slices.ts_ns[a]), int(tr.slices.ts_ns[a] + tr.slices.dur_ns[a])
        assert a0 <= int(tr.slices.ts_ns[d]) <= a1
    assert tr.metadata[EXPLORER_KEY]["framework_join"]["mapping_links"] == 2


def test_runtime_calls_without_framework_events_link_through_the_mapping(tmp_path: Path, host_json: Path) -> None:
    """A system profile processed without its framework trace: no framework rows, each runtime call alone under
    its flow id (the runtime's sequence id). The framework mapping names the op (its autograd seq_nr) for
    flow ids 100 and 101; the executions then count under those ops and their instructions give them device
    time; flow id 102 is in no mapping: that call stays unlinked."""
    doc = orjson.loads(host_json.read_bytes())
    seq = [int(e["args"]["Sequence number"]) for e in _mm_events(doc)]
    pid_dir, _ = _capture(tmp_path, host_json, framework=False,
                          runtime_mapping=[(100, seq[0]), (101, seq[1])])
    tr = load(pid_dir)
    mm = _mm_rows(tr)
    launched = {int(a): int(z) for a, z in zip(tr.flows.src, tr.flows.dst) if tr.slice_name(int(z)) == "nrt_execute"}
    assert sorted(launched) == mm[:2]  # ops 0 and 1, in order
    assert all(int(tr.slices.ts_ns[launched[a]]) - int(tr.slices.ts_ns[a]) >= 150_000 for a in launched)
    assert int(tr.slices.ts_ns[launched[mm[0]]]) < int(tr.slices.ts_ns[launched[mm[1]]])
    ex = tr.metadata[EXPLORER_KEY]
    assert ex["framework_join"]["mapping_links"] == 2
    assert [r["op"] for r in ex["host_ops"]] == ["aten::mm"] and ex["host_ops"][0]["executions"] == 2
    from neuron_prof.analysis import Context, op_table

    t = op_table(tr, Context(tr))
    i = t.find("aten::mm", "device")
    assert i >= 0 and int(t.calls[i]) == 2  # the two executions the mapping tied to aten::mm


def test_one_rank_per_pid_folder_for_merge_and_the_job_summary(tmp_path: Path, host_json: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for r in (0, 1):  # two processes of one job (same pid here, on two instances)
        pid_dir, _ = _capture(tmp_path / f"r{r}", host_json, rank=r)
        shutil.move(str(pid_dir), run / f"i-{r}{pid_dir.name}")
    assert sorted(load(d).rank for d in run.iterdir()) == [0, 1]
    assert main(["summary", str(run), "--workers", "0"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if ln.strip()[:1].isdigit()]
    assert "2 rank(s)" in out and [r[0] for r in rows] == ["0", "1"]
    assert all(any(x.endswith("%") for x in r) for r in rows)  # device busy per rank
    merged = tmp_path / "merged.json"
    assert main(["merge", str(run), "-o", str(merged)]) == 0
    tr = load(merged)
    assert sorted({p.rank for p in tr.processes if p.rank is not None}) == [0, 1]
    assert len(_mm_rows(tr)) == 6


def test_two_ops_starting_together_the_one_on_the_event_thread_wins() -> None:
    """Two ops of one name within the tolerance (two threads dispatching at once): the event's thread decides;
    on a thread neither is on, the nearer start."""
    import numpy as np

    from neuron_prof.loaders.explorer.capture import HostOps
    from neuron_prof.model import TraceBuilder

    b = TraceBuilder()
    t1, t2 = b.thread_track(1, 11), b.thread_track(1, 22)
    r1 = b.add_slice(t1, 1_000_000, 10, "aten::mm", "cpu_op")
    r2 = b.add_slice(t2, 1_000_400, 10, "aten::mm", "cpu_op")
    join = HostOps(b)
    got = join(np.array([22, 11, 99, 99]), ["aten::mm", "aten::add"], np.array([0, 0, 0, 1]),
               np.array([1_000_000, 1_000_400, 1_000_350, 1_000_000]))
    assert got.tolist() == [r2, r1, r2, -1]
    assert (join.asked, join.joined, join.other_thread) == (4, 3, 1)
