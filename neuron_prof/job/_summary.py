"""The job summary: one row per rank and the cross-rank findings, computed from the ranks' pieces.

    with DaskRunner(tasks=len(paths)) as run:
        js = job_summary(paths, run, args=["run/"])
    js.to_dict()            # the `summary --json` document of a job (schema "neuron-prof.job-summary")

Two rounds of tasks: every rank's piece (`rank_piece`), then the cause of each late rank's arrivals
(`rank_cause`, once the clocks are aligned from every rank's collectives). The client holds pieces only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from neuron_prof.analysis import Finding, Kind, sort_findings, with_host_waits
from neuron_prof.job._cluster import TaskResult
from neuron_prof.job._findings import (
    collective_spread,
    rank_differences,
    ranks_to_open,
    steady_only,
    step_skew,
    stragglers,
)
from neuron_prof.job._piece import RankPiece, rank_cause, rank_piece
from neuron_prof.merge import plan_merge, rank_coverage

SCHEMA = "neuron-prof.job-summary"
VERSION = 1


class Runner(Protocol):
    description: str
    scheduler: str | None
    """The cluster's address when the tasks run on an existing one."""

    def map(
        self,
        fn: Callable[..., Any],
        args: Sequence[tuple[Any, ...]],
        on_done: Callable[[int, TaskResult], None] | None = None,
    ) -> list[TaskResult]: ...


@dataclass
class JobSummary:
    """What `summary` prints for a job."""

    ranks: list[dict[str, Any]]
    """One row per rank in rank order, then the sources that failed ({"status": "failed", "error": ...})."""
    findings: list[Finding]
    alignment: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)
    """How it was computed: where, how long, piece sizes."""

    @property
    def open_command(self) -> str | None:
        f = next((f for f in self.findings if f.kind == Kind.RANKS_TO_OPEN), None)
        return str(f.evidence["command"]) if f is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "version": VERSION,
            "ranks": self.ranks,
            "findings": [f.to_dict() for f in self.findings],
            "alignment": self.alignment,
            "run": self.run,
        }


def _failed(source: str, index: int, error: str) -> dict[str, Any]:
    return {"rank": None, "source": source, "index": index, "status": "failed", "error": error}


def job_summary(
    sources: list[str],
    runner: Runner,
    *,
    args: list[str] | None = None,
    warmup_steps: int | None = None,
    on_done: Callable[[str, int, TaskResult], None] | None = None,
) -> JobSummary:
    """Pieces of every rank on `runner`, then the cross-rank findings. `args`: how the user named the job
    (for the `merge --ranks` command). `on_done(phase, i, result)` follows progress."""
    t0 = time.perf_counter()
    tick = (lambda phase: lambda i, r: on_done(phase, i, r)) if on_done else (lambda phase: None)
    results = runner.map(rank_piece, [(s, i, warmup_steps) for i, s in enumerate(sources)], tick("rank"))
    t_pieces = time.perf_counter() - t0
    pieces: list[RankPiece] = []
    failed: list[dict[str, Any]] = []
    seen: dict[int, str] = {}
    for i, (src, res) in enumerate(zip(sources, results)):
        if res.error is not None:
            failed.append(_failed(src, i, res.error))
        elif res.value.rank in seen:
            failed.append(_failed(src, i, f"rank {res.value.rank} again (already {seen[res.value.rank]})"))
        else:
            seen[res.value.rank] = src
            pieces.append(res.value)
    pieces.sort(key=lambda p: p.rank)
    sizes = [p.nbytes() for p in pieces]
    found: list[Finding] = []
    alignment: dict[str, Any] = {}
    t1 = time.perf_counter()
    if len(pieces) > 1:
        plan = plan_merge([p.info for p in pieces if p.info is not None])
        alignment = plan.alignment.to_dict()
        starts = [p.steady_start_ns + plan.shift_ns(p.rank) for p in pieces if p.steady_start_ns is not None]
        late = steady_only(plan.late, max(starts) if len(starts) == len(pieces) else None)
        # a rank the OS did not schedule arrives late for no reason of its own: its run-queue wait is taken out
        late = with_host_waits(late, {p.rank: p.runqueue.shifted(plan.shift_ns(p.rank))
                                      for p in pieces if p.runqueue is not None})
        wall = int(np.median([p.row["wall_ns"] for p in pieces]))
        late_ranks = late.late_ranks() if late is not None else []
        by_rank = {p.rank: p for p in pieces}
        causes_res = runner.map(
            rank_cause,
            [(by_rank[r].source, r, plan.shift_ns(r), late.windows(r)) for r in late_ranks]
            if late is not None
            else [],
            tick("cause"),
        )
        causes = {r: c.value for r, c in zip(late_ranks, causes_res) if c.error is None}
        for r, c in zip(late_ranks, causes_res):
            if c.error is not None:  # the rank loaded once: its cause is unknown, not its lateness
                causes[r] = {"cause": "unknown", "detail": c.error, "ns": 0}
        found = [
            *stragglers(late, causes, plan.wall_ns),
            *step_skew(pieces),
            *rank_differences(pieces, wall),
            *collective_spread(late, plan.wall_ns),
        ]
        found = sort_findings([*rank_coverage([p.info for p in pieces if p.info is not None]), *found])
        # merge reads every rank named: without the ones that failed to load, name the others one by one
        named = args if args is not None and not failed else [p.source for p in pieces]
        # on a cluster, merge's first pass (every rank read once) goes there too
        on = ["--scheduler", runner.scheduler] if runner.scheduler else []
        opener = ranks_to_open(pieces, found, [*named, *on])
        if opener is not None:
            found.append(opener)
    elif pieces:  # one rank of a larger world: the others are missing
        found = rank_coverage([p.info for p in pieces if p.info is not None])
    rows = [p.row for p in pieces] + failed
    return JobSummary(
        ranks=rows,
        findings=found,
        alignment=alignment,
        run={
            "on": runner.description,
            "ranks": len(sources),
            "failed": len(failed),
            "pieces_s": round(t_pieces, 3),
            "findings_s": round(time.perf_counter() - t1, 3),
            "piece_bytes_max": max(sizes, default=0),
            "piece_bytes_median": int(np.median(sizes)) if sizes else 0,
        },
    )
