"""Neuron Explorer tables read as the schema documents them: HbmUsage a bandwidth (B/s), pcore_idx the physical
core within a logical core, dmem_buf_copyin/copyout the copies, Error rows, CpuUsage/HostMemUsage, Summary and
OpcodeSummary, and device time joined to framework ops, source lines and the host ops that launched it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from neuron_prof.analysis import report
from neuron_prof.cli import main
from neuron_prof.loaders import load
from neuron_prof.loaders.explorer.copies import copy_hosts
from neuron_prof.loaders.explorer.reader import EXPLORER_KEY
from neuron_prof.model import TrackKind
from tests.fakes.explorer_profile import PID, T0, TID, USER_FILE, Written, write_profile


@pytest.fixture(scope="module")
def profile(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Written]:
    folder = tmp_path_factory.mktemp("tables") / "p"
    return folder, write_profile(folder, drift=1e-4)


def _track(tr, name: str) -> int:
    return next(i for i, t in enumerate(tr.tracks) if t.name == name)


def _series(tr, name: str) -> list[tuple[int, float]]:
    m = tr.counters.track == _track(tr, name)
    return list(zip(tr.counters.ts_ns[m].tolist(), tr.counters.value[m].tolist()))


def test_hbm_usage_is_a_bandwidth_counter_and_hbm_bytes_come_from_the_system_profile(profile) -> None:
    folder, w = profile
    tr = load(folder)
    bw = tr.tracks[_track(tr, "neuron:0 HBM bandwidth")]
    assert (bw.kind, bw.unit) == (TrackKind.COUNTER, "B/s")
    got = _series(tr, "neuron:0 HBM bandwidth")
    assert [v for _, v in got] == pytest.approx([v for _, v in w.hbm_bandwidth], rel=1e-6)  # f32 as written
    assert all(abs(a - b) <= 2 for (a, _), (b, _) in zip(got, w.hbm_bandwidth))  # placed on the host clock
    assert tr.tracks[_track(tr, "neuron:0 DMA bandwidth")].unit == "B/s"
    names = {t.name for t in tr.tracks}
    assert not [n for n in names if "total_transfer" in n or "(device profile)" in n]
    total = tr.tracks[_track(tr, "neuron device 0 HBM 0 total")]
    assert (total.kind, total.unit) == (TrackKind.MEMORY, "bytes")
    assert _series(tr, "neuron device 0 HBM 0 total") == [(t, float(v)) for t, v in w.hbm_total]
    assert "neuron device 0 HBM 0 tensors" in names and "neuron device 0 HBM 0 collectives" not in names


def test_engines_belong_to_the_logical_core_with_its_physical_cores_inside(tmp_path: Path) -> None:
    """LNC2: ActiveTime.pcore_idx 0 and 1 are the two physical cores of logical core 0 (not cores 0 and 1)."""
    w = write_profile(tmp_path / "p", pcores=2)
    tr = load(tmp_path / "p")
    dev = {t.name: tr.processes[t.process].name for t in tr.tracks if t.kind == TrackKind.DEVICE}
    for p in (0, 1):
        for e in ("tensor", "vector"):
            assert dev[f"neuron:0 pcore {p} {e} engine"] == "neuron:0"
    assert "neuron:1" not in {p.name for p in tr.processes}
    assert tr.metadata[EXPLORER_KEY]["active_time_ns"] == w.busy_ns
    assert set(w.busy_ns) == {"0.0:tensor", "0.1:tensor", "0.0:vector", "0.1:vector"}


def test_copies_are_dmem_buf_copyin_and_copyout_linked_to_their_ops(profile) -> None:
    folder, w = profile
    tr = load(folder)
    pairs = {(tr.slice_name(int(a)), tr.slice_name(int(b))) for a, b in zip(tr.flows.src, tr.flows.dst)}
    assert ("neuron::copy_h2d", "dmem_buf_copyin") in pairs and ("aten::mm#2", "dmem_buf_copyout") in pairs
    assert copy_hosts(folder, "device_to_host") == [(TID, T0 + 1_000_000 + 2 * 2_000_000)]
    assert copy_hosts(folder, "host_to_device") == [(TID, T0 + 500_000)]
    assert len(copy_hosts(folder, "bidirectional")) == 2
    assert copy_hosts(folder, "device_to_host", {"process_id": PID + 1}) == []  # another process's rows


def test_error_rows_are_critical_findings_with_time_and_core(profile) -> None:
    folder, w = profile
    tr = load(folder)
    rep = report(tr)
    errs = [f for f in rep.findings if f.kind == "device_error"]
    assert len(errs) == 1
    f = errs[0]
    assert f.severity == "critical" and "NeuronCore 0" in f.title and "EMBD OOB" in f.title
    assert abs(f.ts_ns - w.errors[0]["ts_ns"]) <= 2 and f.evidence["physical_cores"] == [0]
    assert tr.tracks[int(tr.instants.track[0])].name == "neuron:0 errors"


def test_cpu_and_host_memory_are_counters(profile) -> None:
    folder, _ = profile
    tr = load(folder)
    assert [v for _, v in _series(tr, "CPU 0 utilisation")] == [10.0, 50.0, 90.0, 20.0]
    assert tr.tracks[_track(tr, "CPU 1 utilisation")].unit == "%"
    assert _series(tr, "host memory used")[2] == (T0 + 5_000_000, float(12 << 30))
    assert tr.tracks[_track(tr, "host memory used")].unit == "bytes"
    assert tr.processes[tr.tracks[_track(tr, "host memory used")].process].name == "i-0abc (Neuron Explorer)"


def test_summary_and_opcode_summary_in_summary_and_json(profile, capsys: pytest.CaptureFixture[str]) -> None:
    folder, w = profile
    assert main(["summary", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "Device profile: MFU 41.5%; HFU 44.2%; MBU 63.0%; DMA active 12.5%" in out
    assert "engines active tensor 15.0%, vector 3.5%" in out and "Hardware errors: 1" in out
    assert "MATMUL" in out and "MLP[0]/Linear[0]/aten.mm" in out and f"{USER_FILE}:12" in out
    assert main(["summary", str(folder), "--json"]) == 0
    ex = json.loads(capsys.readouterr().out)["totals"]["neuron_explorer"]
    assert ex["summary"] == pytest.approx(w.summary)
    assert ex["opcodes"] == [pytest.approx(o) for o in w.opcodes]
    assert ex["errors"] == 1 and ex["device_clock"]["anchored_by"] == "executions"


def test_device_time_per_framework_op_source_line_and_host_op(profile) -> None:
    """Instruction.raw_framework_id -> FrameworkInstruction.framework_name; stack_frame_ids -> StackFrame* ->
    the user's line (the one call-site rule); each execution's instructions -> the host op that launched it."""
    folder, w = profile
    ex = load(folder).metadata[EXPLORER_KEY]
    assert {r["framework_name"]: r["device_ns"] for r in ex["framework_ops"]} == w.framework_ns
    assert {r["op"] for r in ex["framework_ops"]} == {"aten::mm"}
    assert {r["site"]: r["device_ns"] for r in ex["source_lines"]} == w.line_ns
    line12 = next(r for r in ex["source_lines"] if r["site"].endswith(":12"))
    assert line12["stack"] == [f"{USER_FILE}:40 <module>", f"{USER_FILE}:12 forward"]
    assert {r["op"]: r["device_ns"] for r in ex["host_ops"]} == w.op_ns
    assert sum(r["device_ns"] for r in ex["framework_ops"]) == sum(ns for _, ns in w.instructions.values())


def test_a_run_wide_table_is_cut_to_one_process(tmp_path: Path) -> None:
    """``view -d RUN_DIR`` writes every process's system events into one table: a process's rows only."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    a, b = tmp_path / "a", tmp_path / "b"
    write_profile(a, pid=PID)
    write_profile(b, pid=PID + 1, instance="i-0def")
    for i in (0, 1):
        name = f"SystemProfileEvents_{i}.parquet"
        pq.write_table(pa.concat_tables([pq.read_table(a / name), pq.read_table(b / name)]), a / name)
    from neuron_prof.loaders.explorer.reader import add_explorer
    from neuron_prof.model import TraceBuilder

    bld = TraceBuilder()
    add_explorer(bld, a, rows={"instance_id": "i-0def", "process_id": PID + 1})
    tr = bld.build()
    pids = {p.pid for p in tr.processes if p.kind == "host" and isinstance(p.pid, int)}
    assert pids == {PID + 1}
    hw = np.flatnonzero(tr.slices.track == _track(tr, "neuron:0 executions"))
    assert len(hw) == 3
    assert "device_clock" not in tr.metadata[EXPLORER_KEY]  # the device profile is the other process's
    assert not [t for t in tr.tracks if t.name.endswith(" engine")]


def test_the_report_has_the_device_profile(profile) -> None:
    from neuron_prof.exporters.html_report import render_html_report

    folder, _ = profile
    tr = load(folder)
    rep = report(tr)
    page = render_html_report(tr, rep.findings, rep.totals)
    body = page[page.index('<section id="device-profile">'):]
    assert "Neuron Explorer schema" in body and "7.4.0 (declared by SchemaFields)" in body
    assert "mfu estimated" in body and "41.5%" in body and "MATMUL" in body and "MLP[0]/Linear[0]/aten.mm" in body
    empty = render_html_report(tr, rep.findings, None)
    assert "No Neuron Explorer device profile" in empty


def test_a_copy_to_host_is_a_sync_point_unless_a_probe_saw_it(profile) -> None:
    """The host op whose work the runtime copied back (dmem_buf_copyout under its flow id) waited for the
    device: a sync point in a loaded profile; in a capture, the sync probe's slice over it is the one wait."""
    from neuron_prof.model import TraceBuilder

    folder, _ = profile
    tr = load(folder)
    syncs = [f for f in report(tr).findings if f.kind == "sync_point"]
    assert [(f.evidence["what"], f.evidence["sync_kind"], f.count) for f in syncs] == [
        ("aten::mm#2", "copy to host", 1)]
    from neuron_prof.loaders.explorer.reader import add_explorer

    b = TraceBuilder()
    mm2 = T0 + 1_000_000 + 2 * 2_000_000
    b.add_slice(b.track(b.process(PID), "sync points", TrackKind.SYNC), mm2, 200_000, "item", "neuron_prof.sync")
    add_explorer(b, folder)
    syncs = [f for f in report(b.build()).findings if f.kind == "sync_point"]
    assert [f.evidence["sync_kind"] for f in syncs] == [""]  # the probe's, not a second one for the copy


def test_every_line_that_launched_executions_has_their_device_time(profile) -> None:
    """System profile alone: each nc_exec_running's time goes to the call site of the host op that launched it
    (op -> runtime call -> execution), through the one call-site rule."""
    from neuron_prof.loaders.explorer.capture import HostOps
    from neuron_prof.loaders.explorer.reader import add_explorer
    from neuron_prof.model import TraceBuilder
    from neuron_prof.model.callsite import EXACT, STACK_LINES

    folder, w = profile
    b = TraceBuilder()
    b.metadata[STACK_LINES] = EXACT
    thread = b.thread_track(PID, TID, "main")
    for k in range(3):
        b.add_slice(thread, T0 + 1_000_000 + k * 2_000_000, 400_000, f"aten::mm#{k}", "cpu_op",
                    {"Call stack": f"{USER_FILE}({10 + k % 2}): step;{USER_FILE}(40): <module>"})
    add_explorer(b, folder, HostOps(b))
    lines = report(b.build()).totals["neuron_explorer"]["device_lines"]
    d = [z - a for a, z in w.exec_host]
    assert {r["site"]: (r["device_ns"], r["executions"]) for r in lines} == {
        f"{USER_FILE}:10": (d[0] + d[2], 2), f"{USER_FILE}:11": (d[1], 1)}


def test_the_profile_converts_to_a_valid_pftrace_with_its_counters_and_errors(profile, tmp_path: Path) -> None:
    from tests.conftest import pftrace_check

    folder, _ = profile
    out = tmp_path / "p.pftrace"
    assert main(["convert", str(folder), str(out)]) == 0
    p = pftrace_check(out)
    assert p.returncode == 0, p.stdout + p.stderr
    back = load(out)
    names = {t.name for t in back.tracks}
    assert {"neuron:0 HBM bandwidth", "CPU 0 utilisation", "neuron:0 errors", "neuron:0 tensor engine"} <= names
    assert len(back.instants) >= 1
