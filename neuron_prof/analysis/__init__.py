"""Analysis: pure functions from a Trace to Findings. Never imports torch, Textual or plotly.

    from neuron_prof.analysis import analyze, report, annotate
    findings = analyze(trace)          # list[Finding], most costly first
    rep = report(trace)                # Report(totals, findings, lines, steps): what summary --json holds
    first = overview(trace, Context(trace))  # its totals and findings alone (a first screen)
    lines = line_table(trace)          # the lines view, columnar (every user line's costs)
    trace2 = annotate(trace)           # trace.findings filled (exporters write them as a findings track)

Each finding family is a registered analysis (`registry.ANALYSES`); add one with `@register(name)` in its
own module and name that module in its kind's entry in `kinds.Kind` (every finding kind is declared there).
"""

from __future__ import annotations

from neuron_prof.analysis.baseline import MEMORY_GROWTH, StepRegression, baseline_violations, step_regression
from neuron_prof.analysis.collectives.host_wait import with_host_waits
from neuron_prof.analysis.collectives.match import RankCollectives, collectives_by_source, match, pick_source
from neuron_prof.analysis.collectives.rows import collective_args, message_bytes
from neuron_prof.analysis.collectives.rows import op_key as collective_key
from neuron_prof.analysis.collectives.source import collective_rows
from neuron_prof.analysis.collectives.stragglers import LateArrivals, dominant_cause, findings_from, late_arrivals
from neuron_prof.analysis.compare import diff, diff_reports
from neuron_prof.analysis.compile.events import CompileGroup, compile_groups, compiles, signature_text
from neuron_prof.analysis.compile.graphs import GraphCompiles, graph_compiles, graph_of
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.device.fallback import fallback_names, norm_op
from neuron_prof.analysis.device.idle import device_label, device_rows
from neuron_prof.analysis.device.runqueue import RunQueue, runqueue
from neuron_prof.analysis.finding import COST_WARNING_SHARE, KINDS, SEVERITIES, Finding
from neuron_prof.analysis.fmt import fit_site, fmt_bytes, fmt_evidence, fmt_ns, fmt_value, short_site, strip_site
from neuron_prof.analysis.intervals import merge as merge_intervals
from neuron_prof.analysis.kinds import Family, ForeignKind, Kind, KindInfo, UnknownKind, in_family, info_of, of_family
from neuron_prof.analysis.ops import OpTable, op_key, op_table
from neuron_prof.analysis.partial import partial_line, partial_totals
from neuron_prof.analysis.pipeline import (
    Report,
    analyze,
    annotate,
    compute_totals,
    cross_rank_findings,
    overview,
    report,
    sort_findings,
)
from neuron_prof.analysis.registry import ANALYSES, register
from neuron_prof.analysis.sites.callsites import HostSites, Site, Sites, sites_of
from neuron_prof.analysis.sites.host import slice_depths
from neuron_prof.analysis.sites.lines import LineTable, device_ns_by_host_row, line_table, lines_json
from neuron_prof.analysis.sites.nesting import Nesting, nesting
from neuron_prof.analysis.sites.source import source_context, source_line
from neuron_prof.analysis.steps.boundaries import find_steps
from neuron_prof.analysis.steps.breakdown import PARTS as STEP_PARTS
from neuron_prof.analysis.steps.breakdown import step_breakdown

__all__ = [
    "overview",
    "COST_WARNING_SHARE",
    "partial_line",
    "partial_totals",
    "STEP_PARTS",
    "HostSites",
    "LineTable",
    "device_ns_by_host_row",
    "line_table",
    "lines_json",
    "source_context",
    "source_line",
    "step_breakdown",
    "Nesting",
    "RankCollectives",
    "collectives_by_source",
    "device_label",
    "device_rows",
    "diff",
    "diff_reports",
    "MEMORY_GROWTH",
    "StepRegression",
    "baseline_violations",
    "step_regression",
    "fit_site",
    "fmt_evidence",
    "fmt_value",
    "match",
    "merge_intervals",
    "nesting",
    "slice_depths",
    "pick_source",
    "short_site",
    "strip_site",
    "ANALYSES",
    "KINDS",
    "Family",
    "ForeignKind",
    "Kind",
    "KindInfo",
    "UnknownKind",
    "in_family",
    "info_of",
    "of_family",
    "LateArrivals",
    "RunQueue",
    "SEVERITIES",
    "CompileGroup",
    "GraphCompiles",
    "graph_compiles",
    "graph_of",
    "Context",
    "Finding",
    "OpTable",
    "Report",
    "Site",
    "Sites",
    "analyze",
    "annotate",
    "collective_args",
    "collective_key",
    "collective_rows",
    "compile_groups",
    "compiles",
    "compute_totals",
    "cross_rank_findings",
    "dominant_cause",
    "fallback_names",
    "find_steps",
    "findings_from",
    "fmt_bytes",
    "fmt_ns",
    "late_arrivals",
    "message_bytes",
    "norm_op",
    "op_key",
    "op_table",
    "register",
    "report",
    "signature_text",
    "sites_of",
    "sort_findings",
    "runqueue",
    "with_host_waits",
]

