"""The metadata a session writes into its trace: wall window, steps, rank, host, the profiler's own costs,
how the block ended, the host's run-queue samples."""

from __future__ import annotations

from typing import Any

from neuron_prof.backends.base import CaptureContext
from neuron_prof.capture import _env
from neuron_prof.model import Meta

CAPTURE_TIMINGS = "capture_timings_ns"
"""Metadata key: {phase: ns} of the profiler's own work (start, stop, export, parse, contribute, build)."""
CAPTURE_EXIT = "capture_exit"
"""Metadata key: how the block ended: "ok", "exception: ValueError: ...", "KeyboardInterrupt", "SIGTERM", "atexit"."""
PROCESS_GROUP = "process_group"
"""Metadata key: torch.distributed facts (backend, group name and ranks, local rank) when initialised."""


def session_metadata(ctx: CaptureContext, collector: Any, timings: dict[str, int], backend: Any,
                     pg_info: dict[str, Any] | None, runqueue: Any, reason: str, end_ns: int) -> dict[str, Any]:
    """The session's metadata at `end_ns`; `timings` gains the collector's export/parse/site costs."""
    c = collector
    if c is not None:
        timings["export"] = c.export_ns
        timings["parse"] = c.parse_ns
        timings["sites_cpu"] = c.sites_ns  # the exact-site walk and the stack rewrite, CPU time
        timings["rewrite_cpu"] = c.rewrite_ns
    md: dict[str, Any] = {
        Meta.SOURCE_FORMAT: "capture", Meta.CLOCK: "unix", Meta.WALL: [ctx.start_ns, end_ns],
        Meta.STEPS: [list(s) for s in ctx.steps], Meta.BACKEND: getattr(backend, "name", None),
        Meta.RANK: ctx.rank, Meta.WORLD_SIZE: ctx.world_size,
    }
    if pg_info is not None:
        md[PROCESS_GROUP] = pg_info
    md.update(_env.host_metadata())
    # What we can measure of the profiler inside the region: the time its step() held the user's
    # thread (step markers, and a cycle's export + conversion under a schedule with repeat). Start and
    # stop lie outside the region (see CAPTURE_TIMINGS); the per-op recording cost cannot be measured
    # in-process (bench/bench_capture.py does). The backend adds its probes' costs in contribute().
    md[Meta.OVERHEAD_NS] = int(timings.get("in_steps", 0))
    md[CAPTURE_TIMINGS] = dict(timings)
    md[CAPTURE_EXIT] = reason
    rq = runqueue
    if rq is not None and rq.samples:
        md[Meta.RUNQUEUE] = [list(x) for x in rq.samples]
        md[Meta.LOADAVG] = [list(x) for x in rq.loadavg]
    md["profiler_cycles"] = c.cycles if c is not None else 0
    if c is not None and c.prune:
        md[Meta.CAPTURE_REDUCED] = {"python": c.pruned.as_dict()}
    return md
