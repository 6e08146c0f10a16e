"""The report's "Critical path" section: per step whose path was worked out (the first steps after warm-up,
`analysis.efficiency.critical_path`), how long the path is, its host / device queue / collective shares and its
heaviest slices with their kind, user line and share of the path. Built from the totals' ``efficiency`` object
(``critical_path``) only."""

from __future__ import annotations

from typing import Any

from neuron_prof.analysis.efficiency.critical_path import PART_WORDS, path_parts
from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.exporters._report_html import empty, note, table


def critical_path_section(totals: dict[str, Any] | None) -> str:
    """One table per step: its path's segments, heaviest first."""
    paths = ((totals or {}).get("efficiency") or {}).get("critical_path") or []
    paths = [p for p in paths if p.get("length_ns")]
    if not paths:
        return empty("No critical path: no host op or device work in the steps (or the trace was too large).")
    parts = [note("Holistic Trace Analysis's lightweight critical path: host threads and device queues as "
                  "chains joined by launches and syncs, working time as weight; the chain the step waited on. "
                  "Findings whose time lies on it rank first.")]
    for p in paths:
        span = p["end_ns"] - p["start_ns"]
        parts.append(f"<h3>step {p['step']}: path {fmt_ns(p['length_ns'])} of {fmt_ns(span)}</h3>")
        parts.append(note(path_parts(p)))
        rows = [(t["name"], PART_WORDS.get(t["kind"], t["kind"]), t.get("call_site") or "-", fmt_ns(t["ns"]),
                 f"{100 * t.get('share', 0):.1f}%") for t in p.get("top") or []]
        parts.append(table(("slice", "on", "your line", "time on the path", "share"), rows, num=(3, 4)))
    return "".join(parts)
