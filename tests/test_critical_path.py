"""The critical path of a step (issue 37 item 3), on Kineto traces built by hand where the path is known."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import neuron_prof
from neuron_prof.analysis import Context, Finding, report, sort_findings
from neuron_prof.analysis.efficiency.critical_path import critical_path, mark_on_path, on_path
from neuron_prof.cli import main
from tests._builders import KINETO_BASE

US = 1000


def _trace(tmp_path: Path, kernel_us: int) -> Path:
    """One step of 1000 µs: op A (0-100 µs) launches a kernel at 50 µs that runs from 100 µs for `kernel_us`;
    op B (100-200) is host work; cudaDeviceSynchronize waits from 200 µs until the kernel ends (at least 10
    µs); op C runs 50 µs after the wait."""
    k_end = 100 + kernel_us
    sync_end = max(k_end, 210)
    ev = [
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 1000},
        {"ph": "X", "cat": "cpu_op", "name": "A", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 50, "dur": 10,
         "args": {"correlation": 5}},
        {"ph": "X", "cat": "cpu_op", "name": "B", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "pid": 1, "tid": 1, "ts": 200,
         "dur": sync_end - 200},
        {"ph": "X", "cat": "cpu_op", "name": "C", "pid": 1, "tid": 1, "ts": sync_end, "dur": 50},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 100, "dur": kernel_us,
         "args": {"correlation": 5, "stream": 7}},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 1, "tid": 1, "ts": 50},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 0, "tid": 7, "ts": 100, "bp": "e"},
    ]
    p = tmp_path / f"cp{kernel_us}.json"
    p.write_text(json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": KINETO_BASE, "traceEvents": ev}))
    return p


def _names(t: neuron_prof.Trace, segs: list[tuple[str, int, int, int]]) -> list[tuple[str, str, int]]:
    return [(k, t.slice_name(r), (e - s) // US) for k, r, s, e in segs]


def test_device_bound_step_runs_through_the_kernel(tmp_path: Path) -> None:
    t = neuron_prof.load(_trace(tmp_path, 600))
    ctx = Context(t)
    (p,) = critical_path(ctx)
    # host up to the launch (A, 50 µs), the kernel (600 µs), then C after the wait (50 µs); B and the wait
    # are off the path
    assert _names(t, p.segments) == [("host", "A", 50), ("device", "gemm", 600), ("host", "C", 50)]
    assert (p.host_ns, p.device_ns, p.length_ns) == (100 * US, 600 * US, 700 * US)
    b = [r for r in range(len(t.slices)) if t.slice_name(r) == "B"]
    assert not on_path(ctx, b)
    assert on_path(ctx, [r for r in range(len(t.slices)) if t.slice_name(r) == "gemm"])


def test_host_bound_step_stays_on_the_host(tmp_path: Path) -> None:
    t = neuron_prof.load(_trace(tmp_path, 20))
    (p,) = critical_path(Context(t))
    # the kernel (20 µs) ends long before the host's own work does: A (100 µs, the launch inside it is A's
    # too), B, then C after a wait that lasted only 10 µs
    assert p.device_ns == 0
    assert p.host_ns == (100 + 100 + 50) * US
    assert [n for _, n, _ in _names(t, p.segments)][0] in ("A", "cudaLaunchKernel")


def _finding(t: neuron_prof.Trace, name: str, cost_us: int) -> Finding:
    rows = [r for r in range(len(t.slices)) if t.slice_name(r) == name]
    return Finding(kind="sync_point", severity="warning", title=f"on {name}", cost_ns=cost_us * US,
                   share=cost_us / 1000, count=1, evidence={"rows": rows})


def test_findings_on_the_path_rank_before_costlier_ones_off_it(tmp_path: Path) -> None:
    t = neuron_prof.load(_trace(tmp_path, 600))
    ctx = Context(t)
    # same severity: the one on B (off the path) costs more, the ones on the kernel and on C (on it) less
    found = sort_findings([_finding(t, "B", 90), _finding(t, "gemm", 40), _finding(t, "C", 30)])
    assert [f.title for f in found] == ["on B", "on gemm", "on C"]  # by cost alone
    ranked = sort_findings(mark_on_path(ctx, found))
    assert [f.title for f in ranked] == ["on gemm", "on C", "on B"]
    assert [bool(f.evidence.get("on_critical_path")) for f in ranked] == [True, True, False]
    # host-bound: the kernel is off the path, B on it
    t2 = neuron_prof.load(_trace(tmp_path, 20))
    ranked2 = sort_findings(mark_on_path(Context(t2), [_finding(t2, "gemm", 90), _finding(t2, "B", 10)]))
    assert [f.title for f in ranked2] == ["on B", "on gemm"]
    # an info note on the path does not jump a costlier warning off it
    note = dataclasses.replace(_finding(t, "gemm", 40), severity="info", title="note on gemm")
    ranked3 = sort_findings(mark_on_path(ctx, [note, _finding(t, "B", 90)]))
    assert [f.title for f in ranked3] == ["on B", "note on gemm"]


def test_report_marks_and_ranks_by_the_path(tmp_path: Path) -> None:
    t = neuron_prof.load(_trace(tmp_path, 600))
    rep = report(t)
    # the only finding: the wait on the kernel, itself no working time, so off the path
    assert rep.findings and not any(f.evidence.get("on_critical_path") for f in rep.findings)


def test_report_page_shows_the_path_of_the_step(tmp_path: Path) -> None:
    src = _trace(tmp_path, 600)
    out = tmp_path / "r.html"
    assert main(["report", str(src), "-o", str(out)]) == 0
    page = out.read_text()
    sec = page[page.index('id="critical-path"'):]
    sec = sec[:sec.index("</section>")]
    # 700 µs of the 1000 µs step: host A and C (100 µs, 14%), the kernel (600 µs, 86%)
    assert "step 0: path 700.0 µs of 1.0 ms" in sec
    assert "host 14% · device queue 86%" in sec
    gemm = sec[sec.index("<td>gemm</td>"):]
    assert "device queue" in gemm[:200] and "85.7%" in gemm[:400]
    assert "collectives" not in sec.split("</p>", 2)[1]  # no collective part on this step


def _two_syncs(tmp_path: Path) -> Path:
    """No steps: op A (0-100 µs) launches K1 (100-400) and waits for it (100-400); op B (400-450) launches K2
    at 420 (450-800) and waits for it (450-800); op C (800-850)."""
    def x(name: str, cat: str, ts: int, dur: int, tid: int = 1, pid: int = 1, **args: object) -> dict[str, object]:
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}

    ev = [x("A", "cpu_op", 0, 100), x("cudaLaunchKernel", "cuda_runtime", 50, 10, correlation=1),
          x("cudaDeviceSynchronize", "cuda_runtime", 100, 300),
          x("B", "cpu_op", 400, 50), x("cudaLaunchKernel", "cuda_runtime", 420, 10, correlation=2),
          x("cudaDeviceSynchronize", "cuda_runtime", 450, 350), x("C", "cpu_op", 800, 50),
          x("K1", "kernel", 100, 300, tid=7, pid=0, correlation=1, stream=7),
          x("K2", "kernel", 450, 350, tid=7, pid=0, correlation=2, stream=7)]
    for i, (ts, kts) in enumerate(((50, 100), (420, 450)), start=1):
        ev += [{"ph": "s", "cat": "ac2g", "name": "ac2g", "id": i, "pid": 1, "tid": 1, "ts": ts},
               {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": i, "pid": 0, "tid": 7, "ts": kts, "bp": "e"}]
    p = tmp_path / "two_syncs.json"
    p.write_text(json.dumps({"schemaVersion": 1, "baseTimeNanoseconds": KINETO_BASE, "traceEvents": ev}))
    return p


def test_the_path_crosses_host_and_device_at_each_sync(tmp_path: Path) -> None:
    t = neuron_prof.load(_two_syncs(tmp_path))
    (p,) = critical_path(Context(t))  # no steps: the whole trace
    # host to the first launch, K1, host from the first wait's end to the second launch, K2, then C:
    # 50 + 300 + 20 + 350 + 50 µs, longer than any path that stays on one side
    assert _names(t, p.segments) == [("host", "A", 50), ("device", "K1", 300), ("host", "B", 20),
                                     ("device", "K2", 350), ("host", "C", 50)]
    assert (p.host_ns, p.device_ns) == (120 * US, 650 * US)
