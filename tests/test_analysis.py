"""Findings on a synthetic workload built the way the probes write events (model/schema.py).

The workload has known problems at known sites; the expected numbers are computed here from the
construction, independently of the analysis code.
"""

from __future__ import annotations

import itertools
import json
import sys
from typing import Any

import numpy as np
import pytest

from neuron_prof.analysis import COST_WARNING_SHARE, KINDS, SEVERITIES, Finding, analyze, annotate, report
from neuron_prof.model import Arg, Cat, KinetoCat, Meta, ProcessKind, Trace, TraceBuilder, TrackKind
from tests._builders import one, stack
from tests._workload import (
    FRAME_CALLS,
    FRAME_SIZES,
    GIB,
    MS,
    N_STEPS,
    STEP,
    STEP0,
    T0,
    WALL,
    Workload,
    step_start,
)


@pytest.fixture(scope="module")
def workload() -> Trace:
    return Workload(problems=True).build()


@pytest.fixture(scope="module")
def findings(workload: Trace) -> list[Finding]:
    return analyze(workload)


def brute_plan(sizes: list[int], counts: list[int], k: int) -> tuple[int, list[int]]:
    """Least padded waste over every choice of k buckets among the sizes (the largest always included)."""
    xs = sorted(set(sizes))
    cnt = {s: 0 for s in xs}
    for s, c in zip(sizes, counts, strict=True):
        cnt[s] += c
    best: tuple[int, list[int]] | None = None
    for comb in itertools.combinations(xs[:-1], min(k, len(xs)) - 1):
        b = [*comb, xs[-1]]
        w = sum(cnt[x] * (min(v for v in b if v >= x) - x) for x in xs)
        if best is None or w < best[0]:
            best = (w, b)
    assert best is not None
    return best


# ---- the contract ------------------------------------------------------------------------------
def test_findings_follow_the_contract(findings: list[Finding]) -> None:
    assert findings, "the problem workload must produce findings"
    for f in findings:
        assert f.kind in KINDS and f.severity in SEVERITIES
        assert 0.0 <= f.share <= 1.0 and f.cost_ns >= 0 and f.count >= 1
        assert f.title and f.advice
        assert f.share == pytest.approx(f.cost_ns / WALL)
        assert Finding.from_dict(f.to_dict()) == f
        json.dumps(f.to_dict(), allow_nan=False)  # plain JSON: exporters write findings without options
    costs = [f.cost_ns for f in findings]
    assert costs == sorted(costs, reverse=True), "most costly first"


def test_every_built_in_problem_is_its_own_finding(findings: list[Finding]) -> None:
    kinds = {f.kind for f in findings}
    assert kinds >= {
        "first_call_compile",
        "recompile",
        "shape_churn",
        "cpu_fallback",
        "dtype_demotion",
        "sync_point",
        "device_idle",
        "memory_peak",
        "collective",
        "probe_error",
        "profiler_overhead",
    }


def test_clean_workload_has_nothing_at_warning_or_above() -> None:
    found = analyze(Workload(problems=False).build())
    assert [f.title for f in found if f.severity != "info"] == []
    assert {f.kind for f in found} <= {"collective", "memory_peak"}


# ---- compiles ------------------------------------------------------------------------------------
def test_first_call_compile_names_ops_sites_and_steps(findings: list[Finding]) -> None:
    f = one(findings, "first_call_compile")
    # aten::mm 20 ms + aten::add 20 ms + the first graph 5 ms, back to back in step 0
    assert f.cost_ns == 45 * MS and f.count == 3
    assert f.call_site == "train.py:42"  # aten::mm ties aten::add at 20 ms; first by cost then order
    # all in the warm-up step, one per statement: a cold cache, not a problem of the steady state; a warning
    # all the same by its cost (over COST_WARNING_SHARE of this short run), but only in warm-up
    assert f.share >= COST_WARNING_SHARE and f.severity == "warning" and f.after_warmup is False
    assert f.title.startswith("Cold compile cache: 3 compiles of 3 ops")
    assert f.evidence["cold"] == {"count": 3, "ns": 45 * MS, "after_warmup": 0}
    assert f.evidence["new_shapes"] == {"count": 0, "ns": 0}
    top = f.evidence["sites"][0]
    assert (top["op"], top["call_site"], top["count"], top["total_ns"]) == ("aten::mm", "train.py:42", 1, 20 * MS)
    ops = {o["op"]: o for o in f.evidence["ops"]}
    assert ops["aten::mm"]["call_site"] == "train.py:42" and ops["aten::add"]["call_site"] == "train.py:43"
    assert ops["aten::mm"]["signatures"] == ["aten::mm(f32[8, 128], f32[128, 64])"]
    assert f.evidence["steps"] == [0] and f.evidence["warmup_ns"] == 45 * MS and f.evidence["steady_ns"] == 0
    assert "TORCH_NEURONX_NEFF_CACHE_DIR" in f.advice and "warm-up" in f.advice
    assert f.ts_ns == T0 + 1 * MS


def test_recompile_counts_reasons_and_cost(findings: list[Finding]) -> None:
    f = one(findings, "recompile")
    assert f.count == len(FRAME_SIZES) - 1 and f.cost_ns == 5 * 3 * MS
    assert f.call_site == "train.py:30" and f.module == "model"
    assert f.evidence["dims"] == {"L['x'] dim 0": 5}
    assert f.evidence["reasons"][0]["reason"].startswith("0/0: tensor 'L['x']' size mismatch at index 0")
    # recompiles happen in steps 2..6, all after the one warm-up step
    assert f.evidence["steps"] == [2, 3, 4, 5, 6] and f.evidence["steady_ns"] == 15 * MS


def test_shape_churn_bucket_plan_matches_brute_force(findings: list[Finding]) -> None:
    f = one(findings, "shape_churn")
    assert f.count == len(FRAME_SIZES)
    assert f.evidence["values"] == sorted(FRAME_SIZES)
    assert f.evidence["counts"] == [[s, c] for s, c in zip(FRAME_SIZES, FRAME_CALLS, strict=True)]
    total = sum(s * c for s, c in zip(FRAME_SIZES, FRAME_CALLS, strict=True))
    # the fewest buckets with at most 10% padding, found by brute force
    for k in range(1, len(FRAME_SIZES) + 1):
        waste, buckets = brute_plan(FRAME_SIZES, FRAME_CALLS, k)
        if waste <= 0.10 * total:
            break
    plan = f.evidence["plan"]
    assert plan["k"] == k and plan["waste"] == waste and plan["buckets"] == buckets
    assert f"{len(FRAME_SIZES)} compiles -> {k} buckets {buckets}" in f.title
    # bucketing saves (6 - k) of the 6 compiles' 5 + 5*3 ms
    assert f.cost_ns == int(20 * MS * (len(FRAME_SIZES) - k) / len(FRAME_SIZES))
    assert str(buckets) in f.advice


def test_eager_shape_churn_from_signatures() -> None:
    b = TraceBuilder()
    host = b.process(1, "host")
    comp = b.track(host, "compile", TrackKind.COMPILE)
    main = b.thread_track(1, 1, "main")
    seqs = [7, 13, 64, 64, 100, 128, 31]
    t = T0
    for n in sorted(set(seqs)):
        b.add_slice(
            comp,
            t,
            MS,
            "aten::bmm",
            Cat.COMPILE,
            {
                Arg.COMPILE_KIND: "eager",
                Arg.CACHE: "miss",
                Arg.CALL_SITE: "attn.py:9",
                Arg.SIGNATURE: f"aten::bmm(bf16[4, {n}, 64], bf16[4, 64, {n}])",
            },
        )
        t += 2 * MS
    for n in seqs:  # host calls with Kineto "Input Dims": 64 occurs twice
        b.add_slice(main, t, 1000, "aten::bmm", KinetoCat.CPU_OP, {"Input Dims": [[4, n, 64], [4, 64, n]]})
        t += 2000
    f = one(analyze(b.build()), "shape_churn")
    assert f.evidence["dimension"] == "input 0 dim 1"
    assert f.evidence["values"] == [7, 13, 31, 64, 100, 128]
    assert dict(map(tuple, f.evidence["counts"]))[64] == 2
    sizes = [s for s, _ in f.evidence["counts"]]
    counts = [c for _, c in f.evidence["counts"]]
    assert f.evidence["plan"]["waste"] == brute_plan(sizes, counts, f.evidence["plan"]["k"])[0]
    assert f.call_site == "attn.py:9"


# ---- fallback, dtype, sync -------------------------------------------------------------------------
def test_cpu_fallback_hot_spot(findings: list[Finding]) -> None:
    f = one(findings, "cpu_fallback")
    assert f.call_site == "model.py:88" and f.module == "model.router"
    assert f.count == N_STEPS - 1 and f.cost_ns == (N_STEPS - 1) * 2 * MS
    assert f.evidence["op"] == "aten::nonzero" and f.evidence["copy_bytes"] == (N_STEPS - 1) * 4096
    assert f.evidence["steady_per_step_ns"] == 2 * MS and f.evidence["steady_steps_hit"] == N_STEPS - 1
    assert f.evidence["steady_step_share"] == pytest.approx(2 / 10)  # of each 10 ms steady step
    assert "torch.where" in f.advice  # the known alternative


def test_dtype_demotion(findings: list[Finding]) -> None:
    f = one(findings, "dtype_demotion")
    assert f.call_site == "data.py:12" and f.count == 2 and f.severity == "warning"
    assert f.evidence["from"] == "float64" and f.evidence["to"] == "float32"
    assert f.evidence["ops"] == ["aten::_to_copy"] and f.ts_ns == step_start(1) + 200_000


def test_sync_point_per_step(findings: list[Finding]) -> None:
    f = one(findings, "sync_point")
    assert f.call_site == "train.py:57" and f.count == N_STEPS - 1
    assert f.cost_ns == (N_STEPS - 1) * 500_000
    assert f.evidence["sync_kind"] == "item" and f.evidence["steady_steps_hit"] == N_STEPS - 1
    assert "1.0 per steady step" in f.title and ".item()" in f.advice


@pytest.mark.parametrize("exact", [True, False])
def test_runtime_synchronize_gets_the_users_call_site(exact: bool) -> None:
    """CUDA traces: cudaStreamSynchronize under aten::item, call site from the op's "Call stack". In a trace
    neuron-prof captured the line is the statement's; in torch.profiler's own it is the function's first line,
    which is never given as a call site: the function is named instead."""
    b = TraceBuilder()
    if exact:
        b.metadata["stack_lines"] = "exact"
    main = b.thread_track(7, 7, "main")
    for i in range(3):
        s = T0 + i * MS
        b.add_slice(
            main,
            s,
            400_000,
            "aten::item",
            KinetoCat.CPU_OP,
            {"Call stack": stack("/work/loop.py(77): train_step", "/work/loop.py(101): main")},
        )
        b.add_slice(main, s + 10_000, 300_000, "aten::_local_scalar_dense", KinetoCat.CPU_OP)
        b.add_slice(main, s + 20_000, 250_000, "cudaStreamSynchronize", KinetoCat.CUDA_RUNTIME)
    f = one(analyze(b.build()), "sync_point")
    assert f.count == 3 and f.cost_ns == 3 * 250_000
    assert f.evidence["what"] == "aten::_local_scalar_dense"
    if exact:
        assert f.call_site == "/work/loop.py:77" and f.evidence["stack"] == ["/work/loop.py:101 main",
                                                                              "/work/loop.py:77 train_step"]
    else:
        assert f.call_site == "" and f.evidence["function"] == "/work/loop.py train_step"
        assert "function entry lines" in f.evidence["site_unknown"]


def test_probe_sync_and_its_runtime_call_count_once() -> None:
    b = TraceBuilder()
    host = b.process(1, "host")
    main = b.thread_track(1, 1, "main")
    sync = b.track(host, "sync", TrackKind.SYNC)
    b.add_slice(sync, T0, MS, "aten::item", Cat.SYNC, {Arg.CALL_SITE: "a.py:1", Arg.SYNC_KIND: "item"})
    b.add_slice(main, T0 + 100, MS // 2, "cudaStreamSynchronize", KinetoCat.CUDA_RUNTIME)
    fs = [f for f in analyze(b.build()) if f.kind == "sync_point"]
    assert len(fs) == 1 and fs[0].cost_ns == MS and fs[0].count == 1


# ---- device, memory, collectives, probes ------------------------------------------------------------
def test_device_idle_gaps_and_host_activity(findings: list[Finding]) -> None:
    f = one(findings, "device_idle")
    # gaps: step0 end (T0+50ms) -> step1 +1 ms, then 6 gaps of 5 ms (+6 ms -> next step +1 ms)
    assert f.count == 7 and f.evidence["idle_ns"] == 1 * MS + 6 * 5 * MS
    # explained by probes inside the gaps: steps 1..6 each +7..+9.5 ms (fallback, all-reduce, item), and
    # 0.9 ms of each recompile in steps 2..6; the cost is the rest
    assert f.evidence["explained_ns"] == 6 * 2_500_000 + 5 * 900_000
    assert f.cost_ns == 31 * MS - f.evidence["explained_ns"] and f.severity == "info"  # 11.5 / 120 ms
    top = f.evidence["largest"][0]
    assert top["dur_ns"] == 5 * MS
    assert top["host"]["what"] == "CPU fallback of aten::nonzero" and top["host"]["parts"][0]["overlap_ns"] == 2 * MS
    assert f.evidence["busy_ns"] == 4 * MS + (N_STEPS - 1) * 5 * MS
    # inside the gaps (step k +6 ms .. step k+1 +1 ms, k = 1..6, and step 1's first 1 ms): steps 1..6 each
    # add fallback 2 ms, item 0.5 ms, all-reduce 0.5 ms (2 ms in step 6); the recompiles starting 0.1 ms
    # into steps 2..6 overlap the 0.9 ms left of those gaps; host ops: nonzero + item (2.5 ms, steps 1..6),
    # aten::mm at +0.5..1 ms of steps 1..7, and 15 "Torch-Compiled Region" spans of 10 µs at +9.6 ms
    during = f.evidence["host_during_idle_ns"]
    assert during["fallback"] == 6 * 2 * MS and during["sync"] == 6 * 500_000
    assert during["collective"] == 5 * 500_000 + 2 * MS and during["compile"] == 5 * 900_000
    assert during["host_ops"] == 6 * 2_500_000 + 7 * 500_000 + 15 * 10_000


def test_memory_peak_names_the_allocation(findings: list[Finding]) -> None:
    f = one(findings, "memory_peak")
    assert f.evidence["peak_bytes"] == 6 * GIB and f.ts_ns == step_start(5) + 3 * MS
    first = f.evidence["largest_allocations"][0]
    assert first["bytes"] == 3 * GIB and first["op"] == "aten::bmm"
    assert first["call_site"] == "/home/u/model.py:120" == f.call_site
    assert f.evidence["ops_at_peak"][-1] == "aten::bmm" and f.evidence["capacity_bytes"] == 32 * GIB
    assert f.severity == "info"


def test_memory_near_capacity_is_a_warning() -> None:
    w = Workload()
    w.b.metadata["device_memory_bytes"] = 0
    tr = w.build()
    tr = tr.replace(metadata={**tr.metadata, "device_memory_bytes": int(6.5 * GIB)})
    f = one(analyze(tr), "memory_peak")
    assert f.severity == "warning" and f.evidence["peak_share"] == pytest.approx(6 / 6.5)


def test_collective_time_bandwidth_and_slow_outlier(findings: list[Finding]) -> None:
    f = one(findings, "collective")
    assert f.count == N_STEPS - 1 and f.evidence["op"] == "allreduce"
    assert f.evidence["total_ns"] == 6 * 500_000 + 2 * MS == f.cost_ns  # nothing overlaps it
    assert f.evidence["algbw_gbps_median"] == pytest.approx((64 << 20) / 500_000)
    slow = f.evidence["slow"]
    assert len(slow) == 1 and slow[0]["dur_ns"] == 2 * MS and slow[0]["median_ns"] == 500_000


def test_collective_overlapped_by_compute_is_not_exposed() -> None:
    f = one(analyze(Workload(problems=False).build()), "collective")
    assert f.evidence["exposed_ns"] == 0 and f.cost_ns == 0 and f.severity == "info"


def test_probe_errors_and_overhead(findings: list[Finding]) -> None:
    e = one(findings, "probe_error")
    assert e.evidence["probe"] == "memory" and "boom" in e.title and e.severity == "warning"
    o = one(findings, "profiler_overhead")
    assert o.cost_ns == int(1.2 * MS) and o.severity == "info"


# ---- steps, totals, annotate, registry, robustness --------------------------------------------------
def test_warmup_is_the_slow_first_steps(workload: Trace) -> None:
    rep = report(workload)
    st = rep.totals["steps"]
    assert st["count"] == N_STEPS and st["warmup"] == 1
    assert st["warmup_step_ns"] == STEP0 and st["steady_step_ns"] == STEP
    assert report(workload, warmup_steps=3).totals["steps"]["warmup"] == 3


@pytest.mark.parametrize(
    ("durs", "warm"),
    [
        ([50, 10, 10, 10], 1),
        ([50, 40, 10, 10, 11], 2),
        ([12, 11, 12, 11], 1),
        ([30, 10], 1),
        ([10, 10], 0),
        ([10], 0),
        ([30, 30, 30, 30], 1),  # churn: every step compiles, the cost stays steady
    ],
)
def test_warmup_rule(durs: list[int], warm: int) -> None:
    b = TraceBuilder()
    b.thread_track(1, 1, "main")
    t, steps = T0, []
    for k, d in enumerate(durs):
        steps.append([k, t, t + d * MS])
        t += d * MS
    b.metadata[Meta.STEPS] = steps
    assert report(b.build()).totals["steps"]["warmup"] == warm


def test_steps_from_profiler_step_annotations() -> None:
    w = Workload(problems=False)
    tr = w.build()
    tr = tr.replace(metadata={k: v for k, v in tr.metadata.items() if k != Meta.STEPS})
    st = report(tr).totals["steps"]
    assert st["count"] == N_STEPS and st["ids"] == list(range(N_STEPS)) and st["steady_step_ns"] == STEP


def test_totals(workload: Trace) -> None:
    t = report(workload).totals
    assert t["wall_ns"] == WALL
    assert t["device_busy_ns"] == 4 * MS + (N_STEPS - 1) * 5 * MS
    assert t["device_busy_share"] == pytest.approx(t["device_busy_ns"] / WALL)
    assert t["compile_ns"] == 45 * MS + 15 * MS and t["compile_miss_count"] == 8
    assert t["fallback_ns"] == 14 * MS and t["sync_count"] == N_STEPS - 1
    assert t["collective_ns"] == 5 * MS
    top = {o["name"]: o for o in t["top_ops"]}
    assert top["aten::nonzero"]["self_ns"] == 14 * MS and top["aten::nonzero"]["count"] == N_STEPS - 1
    assert t["findings_by_severity"]["critical"] >= 2
    # per steady step: the steps without a compile (steps 2..6 recompile the frame: issue 32), 1 and 7:
    # 5 ms device, 2 ms fallback, 0.5 ms sync, collectives 0.5 ms (step 6's slow 2 ms one is not steady), no compile
    assert t["steps"]["phases"] == {"warm-up": 1, "recompiling": 5, "evaluation": 0, "training": 2}
    ps = t["steady_per_step"]
    assert ps["steps"] == 2 and ps["step_ns"] == STEP and sum(ps["parts"].values()) == STEP
    assert ps["device_busy_ns"] == 5 * MS and ps["fallback_ns"] == 2 * MS
    assert ps["sync_ns"] == 500_000 and ps["collective_ns"] == 500_000
    assert ps["compile_ns"] == 0


def test_self_time_subtracts_direct_children_only() -> None:
    b = TraceBuilder()
    main = b.thread_track(1, 1, "main")
    other = b.thread_track(1, 2, "worker")
    b.add_slice(main, 0, 100, "outer", KinetoCat.CPU_OP)
    b.add_slice(main, 10, 50, "mid", KinetoCat.CPU_OP)
    b.add_slice(main, 20, 10, "leaf", KinetoCat.CPU_OP)
    b.add_slice(
        main, 60, 0, "zero", KinetoCat.CPU_OP
    )  # zero-length at mid's end: inside the one starting there
    b.add_slice(main, 60, 30, "next", KinetoCat.CPU_OP)  # back to back with mid
    b.add_slice(other, 0, 1000, "outer", KinetoCat.CPU_OP)  # same name on another thread: no nesting across
    from neuron_prof.analysis.sites.nesting import nesting

    tr = b.build()
    n = nesting(tr, np.arange(6))
    assert n.depth.tolist() == [1, 2, 3, 3, 2, 1]
    assert n.parent.tolist() == [-1, 0, 1, 4, 0, -1]
    assert n.self_ns.tolist() == [100 - 50 - 30, 40, 10, 0, 30, 1000]


def test_annotate_stores_findings(workload: Trace, findings: list[Finding]) -> None:
    tr = annotate(workload)
    assert tr.findings == tuple(f.to_dict() for f in findings)
    assert annotate(workload, findings[:1]).findings == (findings[0].to_dict(),)
    assert workload.findings == ()


def test_registry_adds_an_analysis(workload: Trace) -> None:
    from neuron_prof.analysis import ANALYSES, register

    @register("straggler_test")
    def fake(trace: Trace, ctx: Any) -> list[Finding]:
        return [
            Finding(kind="straggler", severity="info", title="rank 1 late", cost_ns=WALL, share=1.0, count=1)
        ]

    try:
        found = analyze(workload)
        assert found[0].title == "rank 1 late"
    finally:
        del ANALYSES["straggler_test"]


def test_a_failing_analysis_is_reported_not_raised(workload: Trace) -> None:
    from neuron_prof.analysis import ANALYSES, register

    @register("broken_test")
    def broken(trace: Trace, ctx: Any) -> list[Finding]:
        raise RuntimeError("bug")

    try:
        found = analyze(workload)
    finally:
        del ANALYSES["broken_test"]
    f = next(x for x in found if x.evidence.get("probe") == "analysis:broken_test")
    assert "bug" in f.title and f.severity == "warning"
    assert {"cpu_fallback", "first_call_compile"} <= {x.kind for x in found}


def test_empty_trace() -> None:
    tr = TraceBuilder().build()
    assert analyze(tr) == []
    assert report(tr).totals["wall_ns"] == 0


def test_analysis_imports_no_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, neuron_prof.analysis, neuron_prof.analysis.pipeline as r; r._load();"
        "bad=[m for m in sys.modules if m.split('.')[0] in ('torch','textual','plotly')]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _python_lines(fn: Any) -> tuple[Any, int]:
    """`fn()`'s result and how many Python lines it ran (sys.settrace line events, every frame)."""
    count = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        count += 1
        return tracer

    prev = sys.gettrace()
    sys.settrace(tracer)
    try:
        out = fn()
    finally:
        sys.settrace(prev)
    return out, count


def _flat_trace(n: int) -> Trace:
    """`n` host ops on one thread (50 names) and n/5 device kernels, one idle gap per 1,000 kernels; no steps."""
    rng = np.random.default_rng(0)
    b = TraceBuilder()
    host = b.thread_track(1, 1, "main")
    dev_p = b.process("gpu", "gpu 0", ProcessKind.DEVICE)
    dev = b.track(dev_p, "stream 7", TrackKind.DEVICE)
    names = [b.strings.intern(f"aten::op{i}") for i in range(50)]
    cat = b.strings.intern(KinetoCat.CPU_OP)
    b.s_ts = (np.arange(n, dtype=np.int64) * 1000 + T0).tolist()
    b.s_dur = rng.integers(100, 900, n).tolist()
    b.s_track = [host] * n
    b.s_name = [names[i % 50] for i in range(n)]
    b.s_cat = [cat] * n
    b.s_args = [-1] * n
    kname = b.strings.intern("kernel")
    for i in range(0, n // 5):
        b.add_slice_ids(dev, T0 + i * 5000 + (10_000_000 if i % 1000 == 0 else 0), 2000, kname, kname, -1)
    return b.build()


def test_scales_to_a_million_events() -> None:
    """Vectorised: 1M host slices + 200k device slices analyse with no Python work per event: the Python lines
    the analysis runs do not grow with the trace (1M events against 100k; a count, not a time, so the machine's
    load cannot move it; the critical path of a trace without steps once kept a tuple per slice on it: 8x)."""
    n = 1_000_000
    _, small = _python_lines(lambda: report(_flat_trace(n // 10)))
    tr = _flat_trace(n)
    rep, lines = _python_lines(lambda: report(tr))
    assert lines < 2 * small, f"{lines:,} Python lines for {n:,} events, {small:,} for {n // 10:,}: per-event work"
    assert rep.totals["top_ops"][0]["count"] == n // 50
    assert any(f.kind == "device_idle" for f in rep.findings)


def test_eager_churn_one_cause_one_finding() -> None:
    """T changes every step: aten::add sees T, aten::addmm sees 8*T (one cause, one finding); the optimizer
    compiling once per parameter shape in one step is not churn."""
    b = TraceBuilder()
    host = b.process(1, "host")
    comp = b.track(host, "compile", TrackKind.COMPILE)
    seqs = [16, 24, 32, 40]
    b.metadata[Meta.STEPS] = [[k, T0 + k * 100 * MS, T0 + (k + 1) * 100 * MS] for k in range(len(seqs))]

    def compile_(t: int, op: str, shapes: list[list[int]], dur: int) -> None:
        b.add_slice(
            comp,
            t,
            dur,
            op,
            Cat.COMPILE,
            {Arg.COMPILE_KIND: "eager", Arg.CACHE: "miss", Arg.SHAPES: shapes, Arg.CALL_SITE: "gpt.py:20"},
        )

    for k, n in enumerate(seqs):
        s = T0 + k * 100 * MS
        compile_(s + 1 * MS, "aten::add", [[8, n, 64], [8, n, 64]], 5 * MS)
        compile_(s + 10 * MS, "aten::addmm", [[64], [8 * n, 64], [64, 64]], 3 * MS)
    for i, p in enumerate((64, 128, 256)):
        compile_(T0 + (20 + i) * MS, "aten::addcmul_", [[p], [p], [p]], 2 * MS)
    f = one(analyze(b.build()), "shape_churn")
    assert f.evidence["values"] == seqs and f.evidence["dimension"] == "input 0 dim 1"
    assert [r["values"] for r in f.evidence["related"]] == [[8 * n for n in seqs]]
    assert f.call_site == "gpt.py:20" and "2 ops recompiled" in f.title
    # bucketing saves (4 - k) of 4 compiles of each op
    k = f.evidence["plan"]["k"]
    assert f.cost_ns == int(20 * MS * (4 - k) / 4) + int(
        12 * MS * (4 - f.evidence["related"][0]["plan"]["k"]) / 4
    )


def test_probe_sync_without_call_site_takes_it_from_the_host_op() -> None:
    b = TraceBuilder()
    b.metadata["stack_lines"] = "exact"
    host = b.process(1, "host")
    main = b.thread_track(1, 1, "main")
    sync = b.track(host, "sync", TrackKind.SYNC)
    b.add_slice(main, T0, 2 * MS, "train_step", KinetoCat.PYTHON)
    b.add_slice(
        main,
        T0 + MS,
        MS // 2,
        "aten::item",
        KinetoCat.CPU_OP,
        {"Call stack": stack("/home/u/loop.py(31): train_step")},
    )
    b.add_slice(sync, T0 + MS + 100, MS // 3, "Tensor.item", Cat.SYNC, {Arg.SYNC_KIND: "item"})
    f = one(analyze(b.build()), "sync_point")
    assert f.call_site == "/home/u/loop.py:31" and f.evidence["what"] == "Tensor.item"


def test_recompile_limit_hit_is_in_the_advice() -> None:
    w = Workload()
    w.b.add_instant(
        w.compile,
        step_start(7),
        "recompile limit hit",
        Cat.COMPILE,
        {Arg.COMPILE_ID: "0/8", "reason": "cache_size_limit reached", "limit": 8},
    )
    f = one(analyze(w.build()), "recompile")
    assert f.evidence["recompile_limit_hits"] == 1 and "recompile_limit" in f.advice
    assert one(analyze(Workload().build()), "recompile").evidence["recompile_limit_hits"] == 0


def test_rank_is_set_when_the_evidence_is_one_ranks() -> None:
    b = TraceBuilder()
    for rank in (0, 1):
        p = b.process(100 + rank, f"rank {rank}", ProcessKind.HOST, rank=rank)
        fb = b.track(p, "fallback", TrackKind.FALLBACK)
        site = "a.py:1" if rank == 0 else "b.py:2"
        for i in range(2):
            b.add_slice(fb, T0 + i * MS, 100_000, "aten::nonzero", Cat.FALLBACK, {Arg.CALL_SITE: site})
        b.add_slice(fb, T0 + 5 * MS, 100_000, "aten::unique", Cat.FALLBACK, {Arg.CALL_SITE: "shared.py:3"})
    found = [f for f in analyze(b.build()) if f.kind == "cpu_fallback"]
    assert {(f.call_site, f.rank) for f in found} == {("a.py:1", 0), ("b.py:2", 1), ("shared.py:3", None)}


@pytest.mark.parametrize("linked", [True, False])
def test_device_idle_while_the_host_issues_ops_is_dispatch_not_cost(linked: bool) -> None:
    """A host-bound step: the host spends each gap issuing the next op (a flow links each host op to the
    device work it launched). That time is reported as dispatch, not charged as idle cost; the same gaps with
    no link to device work are charged (the host did something else)."""
    b = TraceBuilder()
    main = b.thread_track(1, 1, "main")
    dp = b.process("neuron:0", "neuron:0", kind=ProcessKind.DEVICE)
    dev = b.track(dp, "neuron:0 compute", TrackKind.DEVICE)
    for i in range(10):
        t = T0 + i * MS
        op = b.add_slice(main, t, MS - 1000, "aten::mm", KinetoCat.CPU_OP)
        d = b.add_slice(dev, t + MS - 100_000, 90_000, "aten::mm", Cat.DEVICE)
        if linked:
            b.add_flow(op, d, cat=Cat.DEVICE, name="launch")
    b.metadata[Meta.WALL] = [T0, T0 + 10 * MS]
    f = one(analyze(b.build()), "device_idle")
    assert f.evidence["idle_ns"] == 9 * 910_000
    if linked:
        assert f.evidence["dispatch_ns"] == 9 * (910_000 - 1000) and f.cost_ns == 9 * 1000
        assert f.severity == "info" and "issuing ops" in f.title and "torch.compile" in f.advice
    else:
        assert f.evidence["dispatch_ns"] == 0 and f.cost_ns == 9 * 910_000 and f.severity == "critical"


@pytest.mark.parametrize("per_step", [False, True])
def test_one_statement_compiling_several_tensors_is_not_churn(per_step: bool) -> None:
    """A backward line multiplies several tensors ([3,B]x[B,32], [B,3]x[3,32], [32,B]x[B,10]): shapes compiled in
    one step are different tensors, and a smaller last batch B changes each of them once (2 values: no churn).
    The same statement fed a new size every step is churn in that dimension alone (never mixing 3 and 32)."""
    b = TraceBuilder()
    host = b.process(1, "host")
    comp = b.track(host, "compile", TrackKind.COMPILE)
    steps = []
    t = T0
    def mm(shapes: list[list[int]]) -> None:
        nonlocal t
        b.add_slice(comp, t, MS, "aten::mm", Cat.COMPILE, {Arg.COMPILE_KIND: "eager", Arg.CACHE: "miss",
                                                           Arg.CALL_SITE: "train.py:26", Arg.SIGNATURE: shapes})
        t += 2 * MS
    batches = [16, 24, 40, 8] if per_step else [16, 16, 16, 4]
    seen: set[int] = set()
    for k, bsz in enumerate(batches):
        s0 = t
        if bsz not in seen:
            seen.add(bsz)
            for shapes in ([[3, bsz], [bsz, 32]], [[bsz, 3], [3, 32]], [[32, bsz], [bsz, 10]]):
                mm(shapes)
        t += 5 * MS
        steps.append([k, s0, t])
    b.metadata[Meta.STEPS] = steps
    b.metadata[Meta.WALL] = [T0, t]
    churn = [f for f in analyze(b.build()) if f.kind == "shape_churn"]
    if not per_step:
        assert churn == []
    else:
        assert len(churn) == 1 and churn[0].evidence["values"] == [8, 16, 24, 40], churn[0].evidence


def test_a_compile_groups_label_leaves_out_an_unknown_signature() -> None:
    """Titles name the top group as `name [signature]`; a graph whose inputs are unknown reads `forward`, not
    `forward []`."""
    from neuron_prof.analysis import CompileGroup
    assert CompileGroup("forward", "", "", "", "graph").label == "forward"
    assert CompileGroup("aten::mm", "f32[8, 128]", "", "", "op").label == "aten::mm [f32[8, 128]]"


def test_a_python_int_guard_is_in_the_recompile_title() -> None:
    """A recompile caused by an int argument names its guard (issue 34), in torch 2.13's words (the guard, then
    the source line as a comment), also when a tensor's size failed beside it."""
    b = TraceBuilder()
    comp = b.track(b.process(1, "host"), "compile", TrackKind.COMPILE)
    reasons = ["", "0/0: depth == 1                                 # for _ in range(depth):  # net.py:18 in forward\n"
               "User stack trace:\n  File \"net.py\", line 18, in forward\n    for _ in range(depth):",
               "0/1: tensor 'wav' size mismatch at index 1. expected 64, actual 80\n0/1: depth == 2   # net.py:18"]
    for att, reason in enumerate(reasons):
        b.add_slice(comp, T0 + att * 10 * MS, 3 * MS, "forward", Cat.COMPILE,
                    {Arg.COMPILE_KIND: "torch.compile", Arg.COMPILE_ID: f"0/{att}", Arg.CACHE: "miss",
                     Arg.RECOMPILE_REASON: reason, Arg.CALL_SITE: "train.py:30"})
    f = one(analyze(b.build()), "recompile")
    assert "\n" not in f.title and f.title.endswith(": wav dim 1 varied; guard depth == 1 failed; guard depth == 2 failed")
    assert [g["guard"] for g in f.evidence["guards"]] == ["depth == 1", "depth == 2"]
    assert "each value of depth compiles a graph" in f.advice


def test_a_title_names_a_long_signatures_first_shapes_and_their_count() -> None:
    """An optimizer's foreach op compiles with one shape per parameter: the title keeps one line with the
    first shapes and how many there are (issue 34), the evidence keeps the whole signature."""
    b = TraceBuilder()
    comp = b.track(b.process(1, "host"), "compile", TrackKind.COMPILE)
    sig = [[100, 32], [32, 32], [32], [3, 32], [3]] * 4
    b.add_slice(comp, T0, 3 * MS, "aten::_foreach_add_", Cat.COMPILE,
                {Arg.COMPILE_KIND: "eager", Arg.SIGNATURE: sig, Arg.CACHE: "miss", Arg.CALL_SITE: "train.py:30"})
    f = one(analyze(b.build()), "first_call_compile")
    assert "aten::_foreach_add_ [[100, 32], [32, 32], [32], ... (20 shapes)]" in f.title, f.title
    assert f.title.count("[") == 4 and "\n" not in f.title
    assert f.evidence["sites"][0]["signature"].count("[") == 20


@pytest.mark.parametrize("exact", [True, False])
def test_a_collective_without_a_site_asks_for_stacks_only_when_none_were_recorded(exact: bool) -> None:
    """Issue 34: under `run`, which records stacks, a collective DDP's hooks launched (no frame of the user's on
    the stack) said "profile with with_stack=True"; that advice is for traces recorded without stacks."""
    b = TraceBuilder()
    p = b.process(1, "host")
    coll = b.track(p, "collectives", TrackKind.COLLECTIVE)
    for i in range(4):
        b.add_slice(coll, T0 + i * 10 * MS, 3 * MS, "allreduce", Cat.COLLECTIVE,
                    {"bytes_in": 4096, "bytes_out": 4096, "group": "0"})
    if exact:
        b.metadata["stack_lines"] = "exact"
    f = one(analyze(b.build()), "collective")
    said = f.evidence["site_unknown"]
    assert ("with_stack" in said) is not exact, said


def test_churn_is_charged_to_the_tensor_the_users_code_made() -> None:
    """Issue 34: the first op holding the varying shape was made inside nn.MultiheadAttention (its reshape of
    the user's [B, L, E] batch into [L, B*H, E/H]); the origin to pad is the user's own op that made the batch."""
    b = TraceBuilder()
    host = b.process(1, "host")
    comp = b.track(host, "compile", TrackKind.COMPILE)
    main = b.thread_track(1, 1, "main")
    b.metadata["stack_lines"] = "exact"
    t = T0
    for n in (7, 13, 31, 64, 100):
        b.add_slice(main, t, 1000, "aten::to", KinetoCat.CPU_OP,  # the user's batch
                    {"Input Dims": [[8, n, 32]], "Call stack": "seqcls.py(40): <module>"})
        b.add_slice(main, t + 2000, 1000, "aten::view", KinetoCat.CPU_OP,  # the module's reshape of it
                    {"Input Dims": [[8, n, 32]], "Concrete Inputs": ["", f"[{n}, 32, 8]"],
                     "Call stack": "nn.Module: MultiheadAttention_0;torch/nn/modules/activation.py(1380): forward;"
                                   "seqcls.py(49): forward;seqcls.py(41): <module>"})
        b.add_slice(comp, t + 4000, MS, "aten::bmm", Cat.COMPILE,
                    {Arg.COMPILE_KIND: "eager", Arg.CACHE: "miss", Arg.CALL_SITE: "seqcls.py:49",
                     Arg.SIGNATURE: f"aten::bmm(f32[{n}, 32, 8], f32[{n}, 8, 32])"})
        t += 2 * MS
    f = one(analyze(b.build()), "shape_churn")
    assert f.evidence.get("created_at") == "seqcls.py:40", f.evidence


def test_device_idle_while_a_gloo_collective_runs_is_the_collectives_cost() -> None:
    """A DDP job over gloo (the emulated device's process group): no collective track, the collectives are the
    `gloo:all_reduce` spans of gloo's thread, which the collective finding counts. The device idle while they run
    is theirs, not device idle's cost (one rule for what a collective is: `collective_rows`)."""
    b = TraceBuilder()
    main = b.thread_track(1, 1, "main")
    gloo = b.thread_track(1, 2, "pt_gloo_runloop")
    dp = b.process("neuron:0", "neuron:0", kind=ProcessKind.DEVICE)
    dev = b.track(dp, "neuron:0 compute", TrackKind.DEVICE)
    for i in range(10):
        t = T0 + i * 10 * MS
        b.add_slice(main, t, 10 * MS - 1000, f"ProfilerStep#{i}", KinetoCat.USER_ANNOTATION)
        b.add_slice(dev, t, MS, "aten::mm", Cat.DEVICE)
        b.add_slice(gloo, t + MS, 9 * MS - 1000, "gloo:all_reduce", KinetoCat.USER_ANNOTATION)
    b.metadata[Meta.WALL] = [T0, T0 + 100 * MS]
    found = analyze(b.build())
    assert one(found, "collective").evidence  # the collective finding sees them
    f = one(found, "device_idle")
    assert f.evidence["idle_ns"] == 9 * 9 * MS
    assert f.evidence["explained_ns"] == 9 * (9 * MS - 1000) and f.severity == "info"
