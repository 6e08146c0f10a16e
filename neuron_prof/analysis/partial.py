"""What a partial trace lost: the loader's `metadata["partial"]` made concrete for `summary` and `check`.

A file cut short (or damaged) loads best-effort; the loader records the problems. This says what the reader
is missing, from what the file itself promised: tracks neuron-prof wrote that hold no event any more, and the
findings recorded when the file was written that the analysis no longer finds.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from neuron_prof.analysis.finding import SEVERITIES, Finding
from neuron_prof.model import Meta, Trace
from neuron_prof.model.order import sorted_unique


def partial_totals(trace: Trace, findings: list[Finding]) -> dict[str, Any] | None:
    """`totals.partial`: None for a trace read whole, else {truncated, problems, bytes_read, empty_tracks,
    recorded_findings, found_findings, lost_kinds, lost}, `lost` one line for people."""
    info = trace.metadata.get(Meta.PARTIAL)
    if not isinstance(info, dict):
        return None
    problems = [str(p) for p in info.get("problems") or []]
    used = np.zeros(len(trace.tracks), dtype=bool)
    for table in (trace.slices, trace.instants, trace.counters):
        if len(table):
            used[sorted_unique(table.track)] = True
    empty = [t.name for i, t in enumerate(trace.tracks) if not used[i] and t.kind not in ("thread", "findings")]
    recorded = [f for f in trace.findings if isinstance(f, dict)]
    rec_sev = Counter(str(f.get("severity")) for f in recorded)
    now_kinds = {f.kind for f in findings}
    lost_kinds = sorted({str(f.get("kind")) for f in recorded} - now_kinds)
    parts = []
    if empty:
        parts.append(f"{len(empty)} track{'s' if len(empty) != 1 else ''} left empty "
                     f"({', '.join(empty[:6])}{', ...' if len(empty) > 6 else ''})")
    if recorded:
        sev = ", ".join(f"{rec_sev[s]} {s}" for s in reversed(SEVERITIES) if rec_sev[s])
        parts.append(f"{len(recorded)} findings when it was written ({sev}), {len(findings)} now"
                     + (f"; gone: {', '.join(lost_kinds)}" if lost_kinds else ""))
    if not parts:
        parts.append("the events after the damage" if info.get("truncated") else "the events in the damaged parts")
    return {
        "truncated": bool(info.get("truncated")),
        "problems": problems,
        "bytes_read": info.get("bytes_read"),
        "empty_tracks": empty,
        "recorded_findings": {s: rec_sev[s] for s in SEVERITIES if rec_sev[s]} if recorded else None,
        "found_findings": len(findings),
        "lost_kinds": lost_kinds,
        "lost": "; ".join(parts),
    }


def partial_line(partial: dict[str, Any]) -> str:
    """The one line `summary` and `check` start with for a partial trace."""
    what = "truncated" if partial.get("truncated") else "damaged"
    first = partial["problems"][0] if partial.get("problems") else what
    return f"PARTIAL TRACE ({what}): {first}. Lost: {partial['lost']}"
