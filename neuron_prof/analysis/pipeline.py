"""Running the analyses over a trace: findings most costly first, totals, the Report `summary` prints."""

from __future__ import annotations

import dataclasses
import importlib
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuron_prof.analysis.collectives.stragglers import straggler_findings
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.efficiency.critical_path import ON_CRITICAL_PATH, mark_on_path
from neuron_prof.analysis.efficiency.rates import add_line_efficiency, efficiency_totals
from neuron_prof.analysis.finding import KINDS, SEVERITIES, Finding
from neuron_prof.analysis.kinds import Kind, analysis_modules
from neuron_prof.analysis.overlap import cost_floor, share_overlaps
from neuron_prof.analysis.partial import partial_totals
from neuron_prof.analysis.registry import ANALYSES
from neuron_prof.analysis.sites.lines import lines_json
from neuron_prof.analysis.steps.breakdown import step_breakdown
from neuron_prof.analysis.totals import compute_totals as _totals
from neuron_prof.model import Trace
from neuron_prof.model.order import sorted_unique

_MODULES = analysis_modules()
"""Modules whose @register calls define the built-in analyses (imported on first use): those that the kinds
name (`neuron_prof.analysis.kinds`)."""

_SEV_RANK = {s: i for i, s in enumerate(SEVERITIES)}


def _load() -> None:
    for m in _MODULES:
        importlib.import_module(f"neuron_prof.analysis.{m}")


FAILED_ANALYSIS = "analysis:"
"""The `probe` evidence of the finding that stands for an analysis that raised (`_run`): "analysis:<name>"."""


def analysis_failed(f: Finding) -> bool:
    """Whether `f` says an analysis raised instead of giving its findings (a bug, or out of memory)."""
    probe = (f.evidence or {}).get("probe")
    return isinstance(probe, str) and probe.startswith(FAILED_ANALYSIS)


def _run(trace: Trace, ctx: Context) -> list[Finding]:
    _load()
    found: list[Finding] = []
    for name, fn in ANALYSES.items():
        try:
            found.extend(fn(trace, ctx))
            ctx.drop_pages()  # a cached trace's columns stay mapped, not resident, between analyses
        except Exception as e:  # noqa: BLE001 - an analysis bug must not hide the other findings
            found.append(
                Finding(
                    kind=Kind.PROBE_ERROR,
                    severity="warning",
                    title=f"Analysis {name} failed: {type(e).__name__}: {e}"[:200],
                    cost_ns=0,
                    share=0.0,
                    count=1,
                    advice="Report this with the trace if you can share it.",
                    evidence={"probe": f"{FAILED_ANALYSIS}{name}", "traceback": traceback.format_exc(limit=6)},
                )
            )
    return sort_findings(cost_floor(trace, [_after_warmup(trace, ctx, _with_rank(trace, _in_backward(f)))
                                            for f in found]))


def _after_warmup(trace: Trace, ctx: Context, f: Finding) -> Finding:
    """Set `after_warmup`: whether the finding happens in a steady step (docs/check.md), from its step
    split when it has one, else from the events it rests on, else from where it points on the timeline; a
    finding with no place in time (profiler overhead, an analysis error) concerns the whole run."""
    st = ctx.steps
    if len(st) <= st.warmup:
        return f if f.after_warmup is None else dataclasses.replace(f, after_warmup=None)
    start = int(st.start_ns[st.warmup])
    ev = f.evidence
    if ev.get("evaluation"):  # an evaluation pass's own phase: after warm-up wherever it falls (`steps.evaluation`)
        steady = True
    elif "steady_count" in ev or "steady_ns" in ev:
        steady = int(ev.get("steady_count") or 0) > 0 or int(ev.get("steady_ns") or 0) > 0
    else:
        ts = [f.ts_ns] if f.ts_ns is not None else []
        for key, table in (("rows", trace.slices), ("instants", trace.instants)):
            idx = ev.get(key)
            if isinstance(idx, list) and idx and all(isinstance(i, int) for i in idx):
                sel = np.asarray(idx, dtype=np.int64)
                sel = sel[(sel >= 0) & (sel < len(table))]
                ts += table.ts_ns[sel].tolist()
        steady = not ts or max(ts) >= start
    return dataclasses.replace(f, after_warmup=bool(steady))


def _in_backward(f: Finding) -> Finding:
    """A finding whose site is a forward op's because it happened in that op's backward says so in its title
    (the one place for every kind: their sites come from `_sites`, whose evidence names the autograd node)."""
    node = f.evidence.get("in_backward")
    if not node or "backward of" in f.title:
        return f
    fwd = f.evidence.get("forward_op")
    at = f" at {f.call_site}" if f.call_site and f.call_site not in f.title else ""
    what = (f"the backward of {fwd}{at} ({node})" if fwd
            else f"a backward ({node}) whose forward op is not in the trace")
    return dataclasses.replace(f, title=f"{f.title}, in {what}")


def _with_rank(trace: Trace, f: Finding) -> Finding:
    """Set `rank` when every slice the finding rests on belongs to one rank (merged multi-rank traces)."""
    rows = f.evidence.get("rows")
    if f.rank is not None or not rows or not isinstance(rows, list):
        return f
    try:
        tracks = trace.slices.track[np.asarray(rows, dtype=np.int64)]
    except (IndexError, ValueError):
        return f
    ranks = {trace.processes[trace.tracks[int(t)].process].rank for t in sorted_unique(tracks)}
    if len(ranks) == 1 and (r := ranks.pop()) is not None:
        return dataclasses.replace(f, rank=int(r))
    return f


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Critical findings without a time cost first (a rank that stopped or is missing: the rest of the job is
    read in their light); then warnings and criticals whose time lies on a step's critical path
    (``evidence.on_critical_path``, `efficiency.critical_path.mark_on_path`: the time the step waited on; an
    `info` note never jumps a warning that way); then most costly first; equal cost: the more severe first,
    then by kind and title."""
    return sorted(findings, key=lambda f: (not (f.severity == "critical" and not f.cost_ns),
                                           not (f.evidence.get(ON_CRITICAL_PATH) and f.severity != "info"),
                                           -f.cost_ns,
                                           -_SEV_RANK.get(f.severity, 0), f.kind, f.title))


def analyze(trace: Trace, *, warmup_steps: int | None = None) -> list[Finding]:
    """Every finding for `trace`, most costly first.

    Args:
        trace: the trace to diagnose.
        warmup_steps: leading steps to treat as warm-up; None chooses from step durations.
    """
    return _run(trace, Context(trace, warmup_steps))


def cross_rank_findings(trace: Trace) -> list[Finding]:
    """The findings that need every rank at once (stragglers) of a trace holding several ranks, e.g. a
    `neuron-prof merge` result; each names its rank. Empty for a single rank."""
    return straggler_findings(trace)


@dataclass(frozen=True)
class Report:
    """Totals and findings of one trace: what `summary` prints."""

    totals: dict[str, Any]
    findings: list[Finding]
    lines: list[dict[str, Any]] = field(default_factory=list)
    """The costliest user lines (`_lines.lines_json`)."""
    steps: list[dict[str, Any]] = field(default_factory=list)
    """Per-step breakdown (`_step_breakdown.step_breakdown`)."""

    def to_dict(self) -> dict[str, Any]:
        """The `summary --json` document (schema in docs/summary.md, "summary --json")."""
        return {
            "schema": "neuron-prof.summary",
            "version": 1,
            "totals": self.totals,
            "findings": [f.to_dict() for f in self.findings],
            "lines": self.lines,
            "step_breakdown": self.steps,
        }

    @property
    def whole(self) -> bool:
        """Every analysis ran (no `analysis_failed` finding): a report worth keeping for the next open."""
        return not any(analysis_failed(f) for f in self.findings)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Report:
        """A Report back from its `to_dict` document (a kept one: `neuron_prof.loaders.kept`)."""
        return cls(totals=d["totals"], findings=[Finding.from_dict(f) for f in d["findings"]],
                   lines=d.get("lines") or [], steps=d.get("step_breakdown") or [])


def compute_totals(trace: Trace, *, warmup_steps: int | None = None) -> dict[str, Any]:
    """The totals object alone (see Report)."""
    return _totals(trace, Context(trace, warmup_steps))


def overview(trace: Trace, ctx: Context) -> Report:
    """The totals and findings of `report`, without its lines and per-step breakdown (empty here).

    The first part of `report`, computed the same way over the same context: what a first screen shows
    (the TUI's overview) before the rest is ready; `report` adds the lines and steps over that context.
    """
    findings = _run(trace, ctx)
    totals = _totals(trace, ctx)
    totals["findings_by_severity"] = {s: sum(f.severity == s for f in findings) for s in SEVERITIES}
    totals["findings_by_kind"] = {
        str(k): sum(f.kind == k for f in findings) for k in KINDS if any(f.kind == k for f in findings)
    }
    totals["partial"] = partial_totals(trace, findings)
    totals["shares"] = share_overlaps(trace, findings)
    return Report(totals=totals, findings=findings)


def report(trace: Trace, *, warmup_steps: int | None = None, context: Context | None = None,
           on_overview: Callable[[Report], None] | None = None) -> Report:
    """Totals and findings computed over one shared context (pass `context` to share it further).
    `on_overview(first)` sees the overview (`overview`) before the rest is added to it (the CLI keeps it)."""
    ctx = context or Context(trace, warmup_steps)
    first = overview(trace, ctx)
    if on_overview is not None:
        on_overview(first)
    # efficiency (FLOPs per op, the critical path) is a per-event pass: the report's, never a first screen's or
    # the end of a capture's
    first.totals["efficiency"] = efficiency_totals(ctx, (first.totals.get("neuron_explorer") or {}).get("summary"))
    ctx.drop_pages()
    return dataclasses.replace(first, findings=sort_findings(mark_on_path(ctx, first.findings)),
                               lines=add_line_efficiency(lines_json(trace, ctx), ctx),
                               steps=step_breakdown(trace, ctx))


def annotate(
    trace: Trace, findings: list[Finding] | None = None, *, warmup_steps: int | None = None
) -> Trace:
    """`trace` with `findings` (analysed when not given) stored in trace.findings as plain dicts."""
    if findings is None:
        findings = analyze(trace, warmup_steps=warmup_steps)
    return trace.replace(findings=tuple(f.to_dict() for f in findings))
