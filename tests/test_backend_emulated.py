"""The neuron adapter on the emulated device: the trace's device, compile, fallback, sync, memory and collective
events match the emulator's own ground-truth log (which the profiler never reads).

The workload runs in a subprocess (tests/fakes/emulated_run.py): the emulated device registers once per process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = tmp_path_factory.mktemp("emulated")
    p = subprocess.run([sys.executable, str(REPO / "tests" / "fakes" / "emulated_run.py"), str(out)], cwd=REPO,
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return orjson.loads(p.stdout.split("@@JSON@@", 1)[1])  # type: ignore[no-any-return]


def _gt(run: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    w0, w1 = run["window"]
    return [r for r in run["gt"] if r["kind"] == kind and w0 <= r["host_start_ns"] <= w1]


def _contains(ev: dict[str, Any], r: dict[str, Any]) -> bool:
    return ev["ts"] <= r["host_start_ns"] and r["host_end_ns"] <= ev["ts"] + ev["dur"]


def test_adapter_and_no_errors(run: dict[str, Any]) -> None:
    assert run["backend"] == "neuron"
    assert run["errors"] == []


ALIGN_NS = 5_000
"""The system profile puts hardware times on the host clock through the runtime's sync points (one per 100 ms):
with the emulated device clock's 40 ppm drift, within a few µs (docs/trainium.md)."""


def test_device_timeline_matches_executions(run: dict[str, Any]) -> None:
    # the device timeline comes from the runtime's system profile, processed by neuron-explorer, as on Trainium
    gt = sorted((r["device_start_ns"], r["device_end_ns"]) for r in _gt(run, "exec") + _gt(run, "graph"))
    ex = sorted((e["ts"], e["ts"] + e["dur"]) for e in run["device"] if e["name"] == "nc_exec_running")
    assert {e["track"] for e in run["device"] if e["name"] == "nc_exec_running"} == {"neuron:0 executions"}
    # one NEFF execution per op or graph the emulator ran, at its time (the device clock, aligned)
    assert len(ex) == len(gt)
    assert max(max(abs(a - c), abs(b - d)) for (a, b), (c, d) in zip(ex, gt)) <= ALIGN_NS
    # every execution is linked to the work that launched it (host op -> nrt_execute -> device)
    assert run["device_flows_in"] >= len(ex)


def test_compile_events_match(run: dict[str, Any]) -> None:
    gt = _gt(run, "compile")
    ours = [e for e in run["compile"] if e.get("signature")]
    assert len(ours) == len(gt)
    assert {e["signature"] for e in ours} == {r["detail"]["cache_key"] for r in gt}
    by_key = {r["detail"]["cache_key"]: r for r in gt}
    for e in ours:
        r = by_key[e["signature"]]
        gt_dur = r["host_end_ns"] - r["host_start_ns"]
        assert abs(e["dur"] - gt_dur) <= max(0.05 * gt_dur, 500_000), (e, gt_dur)
        assert abs(e["ts"] - r["host_start_ns"]) <= 1_000_000
    # Dynamo's own compile of the torch.compile frame, one per graph lowering the emulator logged
    dyn = [e for e in run["compile"] if e.get("compile_id")]
    assert len(dyn) == len(_gt(run, "graph_compile")) == 1
    g = _gt(run, "graph_compile")[0]
    assert dyn[0]["ts"] <= g["host_start_ns"] and g["host_end_ns"] <= dyn[0]["ts"] + dyn[0]["dur"]


def test_fallback_events_match(run: dict[str, Any]) -> None:
    gt = _gt(run, "fallback")
    ours = run["fallback"]
    assert len(ours) == len(gt)
    reported = [e for e in ours if not e.get("silent")]
    assert Counter(e["name"] for e in reported) == Counter(r["name"] for r in gt if not r["detail"]["silent"])
    assert Counter(e["name"] for e in ours if e.get("silent")) == Counter(r["name"] for r in gt if r["detail"]["silent"])
    for r in gt:  # each host-side fallback lies inside exactly one event, whose bytes are its input bytes
        hits = [e for e in ours if _contains(e, r)]
        assert len(hits) == 1
        assert hits[0]["input_bytes"] == r["detail"]["bytes_in"]
        assert "emulated_run.py:" in hits[0]["call_site"]


def test_sync_points_match(run: dict[str, Any]) -> None:
    gt = _gt(run, "sync")
    ours = run["sync"]
    assert len(ours) == len(gt)
    assert Counter(e["sync_kind"] for e in ours) == Counter("item" if r["name"] == "item" else r["name"] for r in gt)
    assert all(sum(_contains(e, r) for e in ours) == 1 for r in gt)
    assert all(e["call_site"].startswith("emulated_run.py:") or "/emulated_run.py:" in e["call_site"] for e in ours)


def test_collectives_match(run: dict[str, Any]) -> None:
    gt = _gt(run, "collective")
    ours = [e for e in run["collective"] if e["track"] == "collectives"]  # the host's calls (CcOp: above)
    assert len(ours) == len(gt) == 3
    assert [e["bytes_in"] for e in ours] == [r["detail"] for r in gt] == [16 * 8 * 4] * 3
    assert all(_contains(e, r) for e, r in zip(ours, gt))


def test_memory_counters(run: dict[str, Any]) -> None:
    mem = dict(run["memory"])
    # the device profile's HBM usage (SystemProfileHbmUsage: reserved bytes when the cycle was exported)
    hbm = mem.pop("neuron device 0 HBM 0 total")
    assert len(hbm) == 1 and 0 < hbm[0] <= max(mem["neuron:0 reserved"])
    assert set(mem) == {"neuron:0 allocated", "neuron:0 reserved"}
    alloc = mem["neuron:0 allocated"]
    assert max(alloc) <= run["max_allocated"]
    assert alloc[-1] == run["allocated_now"]
    (peak,) = [p for p in run["memory_peak"] if p["device"] == "neuron:0"]
    assert peak["bytes"] == run["max_allocated"] and peak["device"] == "neuron:0"


def test_float64_demotion(run: dict[str, Any]) -> None:
    # one float64 tensor sent to the device per step; the emulator logs one f64 computation for each
    assert len(run["dtype"]) == len(_gt(run, "f64")) == 3
    for d in run["dtype"]:
        assert d["shape"] == [4, 4] and d["how"] == "to device" and d["call"] == ".to()", d
        assert d["op"] == "aten::copy_" and "emulated_run.py:" in d["call_site"]


def test_named_tracks_round_trip_through_load(run: dict[str, Any]) -> None:
    from tests.conftest import pftrace_check

    for ext, got in run["roundtrip"].items():
        kinds = got["kinds"]
        assert "neuron:0 executions" in kinds["device"], ext
        assert kinds["compile"] == ["compile"] and kinds["fallback"] == ["CPU fallback"], ext
        assert kinds["collective"] == ["collectives"] and kinds["sync"] == ["sync points"], ext  # CcOp: device profile
        assert {"neuron:0 allocated", "neuron:0 reserved"} <= set(kinds["memory"]), ext
        assert got["counts"] == {k: len(run[k]) for k in ("device", "compile", "fallback", "sync", "collective")}, ext
    p = pftrace_check(run["roundtrip"]["pftrace"]["path"])
    assert p.returncode == 0, p.stdout + p.stderr


def test_deep_fallback_mode_gives_exact_call_sites_and_states_its_cost(run: dict[str, Any]) -> None:
    deep = run["deep"]
    assert deep["errors"] == []
    # one step: the reported op (aten::sort) once, at the exact line that called it
    names = [e["name"] for e in deep["events"]]
    assert names == ["aten::sort"]
    (ev,) = deep["events"]
    assert ev["deep"] is True and ev["call_site"].endswith(f"emulated_run.py:{_line('torch.sort(y, dim=-1)', 2)}")
    meta = deep["meta"]
    assert meta["ops_recorded"] >= 4 and meta["overhead_ns_per_op"] > 0  # addmm, relu, addmm, sort, ...


def _line(text: str, nth: int) -> int:
    """Line number of the nth occurrence of `text` in emulated_run.py (the test's own independent answer)."""
    lines = (REPO / "tests" / "fakes" / "emulated_run.py").read_text().splitlines()
    hits = [i + 1 for i, ln in enumerate(lines) if text in ln]
    return hits[nth - 1]
