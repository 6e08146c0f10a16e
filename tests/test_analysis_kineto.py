"""summary/diff on the real torch.profiler traces in ../shared/traces/kineto, checked against the raw JSON."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neuron_prof.analysis import KINDS, SEVERITIES, report
from neuron_prof.analysis.compare import diff
from neuron_prof.loaders import load
from neuron_prof.model import KinetoCat
from tests.conftest import kineto_traces

SYNC_NAMES = {
    "cudaStreamSynchronize",
    "cudaDeviceSynchronize",
    "cudaEventSynchronize",
    "hipStreamSynchronize",
    "hipDeviceSynchronize",
    "hipEventSynchronize",
}
DEVICE_CATS = set(KinetoCat.DEVICE_CATS)


def raw_events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path) if path.name.endswith(".gz") else open(path, "rb") as f:
        doc = json.load(f)
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    return [e for e in ev if isinstance(e, dict)]


def raw_idle_ns(events: list[dict[str, Any]], min_gap_us: float = 100.0) -> float:
    """Idle time in gaps >= 100 µs between device work, per device pid, computed with plain Python."""
    by_pid: dict[Any, list[tuple[float, float]]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in DEVICE_CATS:
            by_pid.setdefault(e["pid"], []).append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))))
    idle = 0.0
    for spans in by_pid.values():
        spans.sort()
        end = spans[0][1]
        for s, e in spans[1:]:
            if s - end >= min_gap_us:
                idle += s - end
            end = max(end, e)
    return idle * 1000


def test_summary_on_real_trace(kineto_trace: Path) -> None:
    events = raw_events(kineto_trace)
    rep = report(load(kineto_trace))
    t = rep.totals
    xs = [e for e in events if e.get("ph") == "X" and "dur" in e]
    span_us = max(float(e["ts"]) + float(e["dur"]) for e in xs) - min(float(e["ts"]) for e in xs)
    assert t["wall_ns"] >= span_us * 1000 * 0.99
    for f in rep.findings:
        assert f.kind in KINDS and f.severity in SEVERITIES and 0 <= f.share <= 1 and f.cost_ns >= 0
    has_device = any(e.get("cat") in DEVICE_CATS for e in xs)
    if has_device:
        assert 0 < t["device_busy_share"] <= 1
        assert t["top_device_ops"], "device work is listed"
    raw_names = {e.get("name") for e in xs}
    assert t["top_ops"] and all(o["name"] in raw_names for o in t["top_ops"])
    # sync points: every CUDA/HIP synchronize call in the file, counted once
    n_sync = sum(1 for e in xs if e.get("name") in SYNC_NAMES)
    assert sum(f.count for f in rep.findings if f.kind == "sync_point") == n_sync
    # idle gaps on GPU traces, same total as a plain-Python sweep over the raw kernels
    idle = raw_idle_ns(xs)
    got = sum(f.evidence["idle_ns"] for f in rep.findings if f.kind == "device_idle")
    assert got == pytest.approx(idle, rel=1e-3, abs=2000)
    # steps from ProfilerStep#N annotations on the host
    steps = {
        e["name"]
        for e in xs
        if str(e.get("name", "")).startswith("ProfilerStep#")
        and e.get("cat") != KinetoCat.GPU_USER_ANNOTATION
    }
    assert t["steps"]["count"] == len(steps)


def test_collectives_on_nccl_trace() -> None:
    path = next((p for p in kineto_traces() if p.name.startswith("nccl_parser")), None)
    if path is None:
        pytest.skip("nccl trace absent")
    xs = [e for e in raw_events(path) if e.get("ph") == "X"]
    kernels = [e for e in xs if e.get("cat") == "kernel" and e["name"].startswith("ncclKernel_AllReduce")]
    rep = report(load(path))
    f = next(f for f in rep.findings if f.kind == "collective" and f.evidence["op"] == "allreduce")
    assert f.count == len(kernels)
    assert f.evidence["total_ns"] == pytest.approx(sum(e["dur"] for e in kernels) * 1000, rel=1e-3)
    sizes = sorted(int(e["args"]["In msg nelems"]) * 4 for e in kernels)
    assert f.evidence["bytes_median"] == int(np.median(sizes))


def test_diff_of_two_ranks_and_of_itself() -> None:
    ranks = [p for p in kineto_traces() if p.name.startswith("trace_filter_sampled_rank-")]
    if len(ranks) < 2:
        pytest.skip("rank traces absent")
    a, b = load(ranks[0]), load(ranks[1])
    d = diff(a, b)
    ra, rb = report(a).totals, report(b).totals
    assert (
        d["step"]["base"] == ra["steps"]["steady_step_ns"]
        and d["step"]["new"] == rb["steps"]["steady_step_ns"]
    )
    assert d["step"]["delta"] == rb["steps"]["steady_step_ns"] - ra["steps"]["steady_step_ns"]
    assert d["ops"] and abs(d["ops"][0]["delta_ns"]) >= abs(d["ops"][-1]["delta_ns"])
    same = diff(a, a)
    assert same["step"]["delta"] == 0 and all(o["delta_ns"] == 0 for o in same["ops"])
    assert all(v["delta_cost_ns"] == 0 for v in same["finding_kinds"].values())
