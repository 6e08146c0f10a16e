"""One rank's piece of a job summary: what a worker computes from a whole rank and sends back (kilobytes).

    piece = rank_piece("run/trace.rank3.pftrace", index=3)     # load, analyse, keep the small part
    cause = rank_cause("run/trace.rank3.pftrace", 3, shift_ns, windows)   # a straggler's cause, later

Pure functions of a path: no torch, no dask. The piece holds the rank's row of the summary, its compile
signatures and fallback ops (to compare ranks), its top findings, and its collectives (`RankInfo`, the
merge's first pass) for clock alignment and late arrivals across ranks.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuron_prof.analysis import SEVERITIES, Context, Kind, RunQueue, compile_groups, dominant_cause, report, runqueue
from neuron_prof.job._remote import load_any
from neuron_prof.merge import RankInfo, rank_of, rank_trace, summarize

TOP_FINDINGS = 5
"""Findings of each rank kept in its piece (the summary lists each rank's costliest)."""
MAX_GROUPS = 200
"""Compile signatures and fallback ops kept per rank (most costly first)."""


@dataclass
class RankPiece:
    """What the client keeps of one rank."""

    source: str
    index: int
    """Position among the job's sources."""
    rank: int
    row: dict[str, Any]
    """The rank's row of the job summary (JSON-ready)."""
    step_ns: np.ndarray
    """Duration of every steady step (warm-up left out)."""
    compiles: dict[str, list[int]] = field(default_factory=dict)
    """"op [signature]" -> [count, total ns] of this rank's compiles."""
    fallbacks: dict[str, list[Any]] = field(default_factory=dict)
    """op -> [count, total ns, call site] of its CPU fallbacks."""
    findings: list[dict[str, Any]] = field(default_factory=list)
    """Its TOP_FINDINGS costliest findings (`Finding.to_dict()`, evidence left out)."""
    info: RankInfo | None = None
    """Its collectives, time range and slice count (`neuron_prof.merge.summarize`)."""
    steady_start_ns: int | None = None
    """Start of its first steady step (its own clock); None without steady steps."""
    runqueue: RunQueue | None = None
    """Its host run-queue samples (its own clock; a few per step at most), None when capture took none."""

    def nbytes(self) -> int:
        """Size of the piece as it travels from a worker (pickled)."""
        return len(pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL))


def _peak_memory(findings: list[Any]) -> int | None:
    """The highest device memory peak (host series only when no device series exists)."""
    peaks = [
        (str(f.evidence.get("series", "")).startswith("host"), int(f.evidence.get("peak_bytes", 0)))
        for f in findings
        if f.kind == Kind.MEMORY_PEAK
    ]
    device = [b for host, b in peaks if not host]
    return max(device or [b for _, b in peaks] or [0]) or None


def rank_piece(source: str, index: int = 0, warmup_steps: int | None = None) -> RankPiece:
    """Load `source`, analyse it, keep the small part. Raises what the loader raises for a bad file."""
    t0, cpu0 = time.perf_counter(), time.process_time()
    trace = load_any(source)
    t1 = time.perf_counter()
    rank = rank_of(trace, index)
    ctx = Context(trace, warmup_steps)
    rep = report(trace, context=ctx)
    tot = rep.totals
    steps = ctx.steps
    steady = steps.dur_ns[steps.steady]
    per = tot.get("steady_per_step") or {}
    row = {
        "rank": rank,
        "source": source,
        "status": "ok",
        "events": int(trace.n_events),
        "wall_ns": int(tot["wall_ns"]),
        "steps": len(steps),
        "warmup_steps": int(steps.warmup),
        "step_median_ns": int(np.median(steady)) if len(steady) else None,
        "step_p90_ns": int(np.percentile(steady, 90)) if len(steady) else None,
        "compile_ns_per_step": per.get("compile_ns"),
        "fallback_ns_per_step": per.get("fallback_ns"),
        "sync_ns_per_step": per.get("sync_ns"),
        "collective_ns_per_step": per.get("collective_ns"),
        "compile_count": int(tot["compile_count"]),
        "compile_ns": int(tot["compile_ns"]),
        "fallback_count": int(tot["fallback_count"]),
        "fallback_ns": int(tot["fallback_ns"]),
        "collective_count": int(tot["collective_count"]),
        "device_busy_share": tot.get("device_busy_share"),
        "peak_memory_bytes": _peak_memory(rep.findings),
        "findings_by_severity": {s: int(tot["findings_by_severity"].get(s, 0)) for s in SEVERITIES},
    }
    compiles: dict[str, list[int]] = {}
    for g in compile_groups(trace, ctx)[:MAX_GROUPS]:
        c = compiles.setdefault(g.label, [0, 0])
        c[0] += len(g.rows)
        c[1] += g.total_ns
    fallbacks: dict[str, list[Any]] = {}
    for f in rep.findings:
        if f.kind == Kind.CPU_FALLBACK and len(fallbacks) < MAX_GROUPS:
            op = str(f.evidence.get("op") or f.title)
            e = fallbacks.setdefault(op, [0, 0, f.call_site])
            e[0] += int(f.count)
            e[1] += int(f.cost_ns)
    top = [{k: v for k, v in f.to_dict().items() if k != "evidence"} for f in rep.findings[:TOP_FINDINGS]]
    info = summarize(trace, index, rank)
    row["load_s"] = round(t1 - t0, 4)
    row["analyse_s"] = round(time.perf_counter() - t1, 4)
    row["cpu_s"] = round(time.process_time() - cpu0, 4)
    return RankPiece(
        source=source,
        index=index,
        rank=rank,
        row=row,
        step_ns=np.asarray(steady, dtype=np.int64),
        compiles=compiles,
        fallbacks=fallbacks,
        findings=top,
        info=info,
        steady_start_ns=int(steps.start_ns[steps.warmup]) if len(steady) else None,
        runqueue=runqueue(ctx),
    )


def rank_cause(
    source: str, rank: int, shift_ns: int, windows: list[tuple[int, int, int]]
) -> dict[str, object]:
    """What `rank` did before its late arrivals (`windows` on the aligned clock; `shift_ns` aligns it)."""
    return dominant_cause(rank_trace(load_any(source), rank, shift_ns), rank, windows)
