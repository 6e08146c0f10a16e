"""Neuron Explorer's Perfetto output (``--output-format perfetto``) read as such: the system profile and its device
profiles joined on one clock by the Parquet path's rules, the capture's torch.profiler ops joined, summary-json
read where present. The files are built from what the documents say (tests/fakes/explorer_perfetto.py); where
they stop (the device file's rows, its clock), the tests cover each case the reader has to handle."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson

from neuron_prof.formats import EXPLORER_PFTRACE, PFTRACE, detect
from neuron_prof.loaders import load
from neuron_prof.model import Meta, TrackKind
from tests.conftest import pftrace_check
from tests.fakes.explorer_perfetto import T0, device_profile, system_profile

MS = 1_000_000
# executions of different lengths: a device profile on the device clock is placed by its duration
EXECS = [(T0 + 10 * MS, 2 * MS), (T0 + 20 * MS, 5 * MS), (T0 + 30 * MS, 3 * MS), (T0 + 40 * MS, 5 * MS)]


def _checked(*paths: Path) -> None:
    for p in paths:
        r = pftrace_check(p)
        assert r.returncode == 0 and "errors: {}" in r.stdout, r.stdout + r.stderr


def _device_slices(tr) -> list[tuple[int, int]]:  # type: ignore[no-untyped-def]
    rows = tr.slices_on(TrackKind.DEVICE)
    names = {tr.slice_name(int(r)) for r in rows}
    assert names
    keep = [int(r) for r in rows if tr.slice_name(int(r)) != "nc_exec_running"]
    return sorted((int(tr.slices.ts_ns[r]), int(tr.slices.dur_ns[r])) for r in keep)


def test_the_registry_knows_explorers_files_by_name_and_content(tmp_path: Path) -> None:
    sys_f = system_profile(tmp_path, EXECS)
    dev_f = device_profile(tmp_path, 3, T0 + 20 * MS, [("engine", 0, MS)])
    _checked(sys_f, dev_f)
    for f in (sys_f, dev_f):
        assert detect(f.read_bytes()[:64], f) is EXPLORER_PFTRACE
        other = tmp_path / "mine.pftrace"
        other.write_bytes(f.read_bytes())
        assert detect(other.read_bytes()[:64], other) is PFTRACE  # same content, our own name: the native reader
    fake = tmp_path / "x" / "system_profile.pftrace"
    fake.parent.mkdir()
    fake.write_text('{"traceEvents": []}')  # JSON content under Explorer's name: the JSON reader
    assert detect(fake.read_bytes(), fake) is not EXPLORER_PFTRACE


def test_a_device_profile_on_the_device_clock_lands_on_its_execution(tmp_path: Path) -> None:
    system_profile(tmp_path, EXECS)
    dev0 = 777_000  # device-clock ns: small, not Unix time
    device_profile(tmp_path, 0, dev0, [("execution", 0, 3 * MS), ("pcore 0 tensor", 500_000, MS)])
    _checked(*tmp_path.glob("*.pftrace"))
    tr = load(tmp_path / "system_profile.pftrace")
    clock = tr.metadata["neuron_explorer"]["device_clock"]["device_profile_model_0.pftrace"]
    assert clock == {"how": "executions", "execution": 2}  # the 3 ms one: EXECS[2]
    assert _device_slices(tr) == [(EXECS[2][0], 3 * MS), (EXECS[2][0] + 500_000, MS)]
    assert tr.metadata[Meta.CLOCK] == "unix"


def test_equally_good_executions_take_the_first_as_the_device_profile_does(tmp_path: Path) -> None:
    system_profile(tmp_path, EXECS)
    device_profile(tmp_path, 1, 5_000, [("execution", 0, 5 * MS)])  # EXECS[1] and EXECS[3] both last 5 ms
    tr = load(tmp_path)
    assert tr.metadata["neuron_explorer"]["device_clock"]["device_profile_model_1.pftrace"]["execution"] == 1
    assert _device_slices(tr) == [(EXECS[1][0], 5 * MS)]


def test_a_device_profile_already_in_unix_time_is_kept_and_checked(tmp_path: Path) -> None:
    system_profile(tmp_path, EXECS)
    device_profile(tmp_path, 0, EXECS[0][0] + 100, [("execution", 0, MS)])
    device_profile(tmp_path, 1, T0 + 60 * MS, [("execution", 0, MS)])  # inside no execution
    tr = load(tmp_path)
    clocks = tr.metadata["neuron_explorer"]["device_clock"]
    assert clocks["device_profile_model_0.pftrace"] == {"how": "unix", "inside_execution": True}
    assert clocks["device_profile_model_1.pftrace"] == {"how": "unix", "inside_execution": False}
    assert _device_slices(tr) == [(EXECS[0][0] + 100, MS), (T0 + 60 * MS, MS)]
    assert any("device_profile_model_1.pftrace" in w and "lies within no nc_exec_running" in w
               for w in tr.metadata[Meta.WARNINGS])


def test_a_device_profile_nothing_places_is_left_out_with_a_warning(tmp_path: Path) -> None:
    system_profile(tmp_path, [(T0 + MS, MS)], framework=[("aten::mm", T0, 3 * MS)])
    (tmp_path / "system_profile.pftrace").unlink()  # no system profile: nothing to pair with
    device_profile(tmp_path, 0, 5_000, [("execution", 0, MS)])
    tr = load(tmp_path / "device_profile_model_0.pftrace")  # a device file alone is read too
    assert tr.metadata["neuron_explorer"]["device_clock"]["device_profile_model_0.pftrace"]["how"] == "none"
    assert len(tr.slices) == 1  # kept on the device clock: there is no host timeline to mislead


def test_the_captures_torch_profiler_ops_are_joined_not_doubled(tmp_path: Path) -> None:
    run = tmp_path / "run"
    cap = run / "i-0abc_pid_4242" / "20251206_101010"
    cap.mkdir(parents=True)
    ops = [("aten::mm", T0 + 10 * MS - 200_000, 3 * MS), ("aten::add", T0 + 20 * MS - 100_000, 6 * MS)]
    doc = {"baseTimeNanoseconds": T0, "traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": n, "pid": 4242, "tid": 4242, "ts": (s - T0) / 1000, "dur": d / 1000}
        for n, s, d in ops]}
    (cap / "trace.json").write_bytes(orjson.dumps(doc))
    out = run / "perfetto"
    out.mkdir()
    system_profile(out, EXECS[:2], framework=ops)
    tr = load(out)
    own = tr.metadata["neuron_explorer"]
    assert own["framework_join"] == {"framework_events": 2, "joined": 2}
    names = [tr.slice_name(i) for i in range(len(tr.slices))]
    assert names.count("aten::mm") == 1 and names.count("aten::add") == 1  # trace.json's, not the profile's too
    # the profile's flows now start at trace.json's ops and reach the runtime and the hardware
    src = {tr.slice_name(int(s)) for s in tr.flows.src}
    dst = {tr.slice_name(int(d)) for d in tr.flows.dst}
    assert {"aten::mm", "aten::add"} <= src and {"nrt_execute", "nc_exec_running"} <= dst
    hw = tr.slices_on(TrackKind.DEVICE)
    assert sorted(int(tr.slices.ts_ns[r]) for r in hw) == [s for s, _ in EXECS[:2]]


def test_summary_json_is_read_where_present_by_the_documented_field_names(tmp_path: Path) -> None:
    system_profile(tmp_path, EXECS)
    # the documents name summary-json and the Summary table's fields, not the file's layout: a profile key
    # (arbitrary) holding Summary fields, and keys that are none of them, which are not taken
    doc = {"some-profile": {"total_time": 0.5, "mfu_estimated_percent": 12.5, "hbm_read_bytes": 4096,
                            "not_a_summary_field": 1}}
    (tmp_path / "summary.json").write_bytes(orjson.dumps(doc))
    (tmp_path / "notes.json").write_bytes(orjson.dumps({"total_time": 1}))  # one field: not a summary
    own = load(tmp_path).metadata["neuron_explorer"]
    assert own["summary"] == {"total_time": 0.5, "mfu_estimated_percent": 12.5, "hbm_read_bytes": 4096}
    assert list(own["summary_json"]) == ["summary.json"]


def test_the_cli_loads_the_folder_and_the_file(tmp_path: Path) -> None:
    system_profile(tmp_path, EXECS)
    device_profile(tmp_path, 0, 1_000, [("execution", 0, 3 * MS)])
    for target in (tmp_path, tmp_path / "system_profile.pftrace"):
        p = subprocess.run([sys.executable, "-m", "neuron_prof", "summary", "--json", str(target)],
                           capture_output=True, timeout=120, check=False)
        assert p.returncode == 0, p.stderr
        totals = orjson.loads(p.stdout)["totals"]
        assert totals["device_busy_ns"] >= sum(d for _, d in EXECS)  # the executions are device time
        assert totals["neuron_explorer"]["device_clock"]["device_profile_model_0.pftrace"]["how"] == "executions"
