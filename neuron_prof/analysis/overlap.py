"""Shares that add up: how much of the profiled wall time the findings' shares sum to, and what overlaps.

Each finding's share is its own cost over the profiled wall time; two findings may count the same time
(shape churn re-counts the compiles of first-call compiles and recompiles; profiler overhead is time spent
inside everything else). `share_overlaps` says so, so that a sum past 100% is never left unexplained, and
`cost_floor` weighs each finding by the time no finding before it counts (one overlap measure: `_shared_ns`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.analysis.finding import SEVERITIES, Finding
from neuron_prof.analysis.fmt import fmt_ns
from neuron_prof.analysis.intervals import intersect_ns, merge
from neuron_prof.analysis.kinds import Kind
from neuron_prof.model import Trace
from neuron_prof.model.order import sorted_unique

SPREAD_KINDS = tuple(k for k in Kind if k.info.spread)
"""Kinds whose cost is spread inside the time of the others (no events of their own)."""


def _rows(f: Finding, n: int) -> np.ndarray:
    rows = f.evidence.get("rows")
    if not isinstance(rows, list) or not rows or not all(isinstance(r, int) for r in rows):
        return np.zeros(0, np.int64)
    a = sorted_unique(np.asarray(rows, dtype=np.int64))
    return a[(a >= 0) & (a < n)]


def _shared_ns(ts: np.ndarray, dur: np.ndarray, a: np.ndarray, b: np.ndarray) -> int:
    """Time the events `a` cover while events `b` run (the same events, or others at the same time: a compile
    inside a fallback, on another thread)."""
    lo, hi = merge(ts[b], dur[b])
    return intersect_ns(ts[a], dur[a], lo, hi)


def cost_floor(trace: Trace, findings: list[Finding]) -> list[Finding]:
    """`findings` with the one cost rule applied (`Finding.cost_floored`), each weighed by the part of its cost
    that no finding before it counts: findings at `warning` or above by their own rules come first (they
    already account for their time), then the rest; most costly first within each. Shape churn's compiles
    then do not raise the first-call compile finding that counts the same compiles."""
    n = len(trace.slices)
    ts, dur = trace.slices.ts_ns, trace.slices.dur_ns
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    order = sorted(range(len(findings)), key=lambda i: (rank.get(findings[i].severity, 0) <= rank["info"],
                                                        -findings[i].cost_ns))
    out = list(findings)
    counted = np.zeros(0, np.int64)
    for i in order:
        f = findings[i]
        rows = _rows(f, n)
        share = f.share
        if f.cost_ns and len(rows) and len(counted):
            shared = min(_shared_ns(ts, dur, rows, counted), f.cost_ns)
            share = f.share * (f.cost_ns - shared) / f.cost_ns
        out[i] = f.cost_floored(share)
        if f.cost_ns and len(rows):
            counted = sorted_unique(np.concatenate([counted, rows]))  # np.union1d, sorted (`sorted_unique`)
    return out


def share_overlaps(trace: Trace, findings: list[Finding]) -> dict[str, Any]:
    """`totals.shares`: {sum, overlaps: [{findings: [i, j] (1-based, as listed), kinds, shared_events,
    shared_ns (time both count)}], spread: [i...], note}. `note` is one line for people when the sum passes
    100%. Events are those of each finding's `evidence.rows` (at most 200 each: a lower bound)."""
    n = len(trace.slices)
    ts, dur = trace.slices.ts_ns, trace.slices.dur_ns
    total = float(sum(f.share for f in findings if f.cost_ns))
    rows = [_rows(f, n) for f in findings]
    overlaps: list[dict[str, Any]] = []
    for i in range(len(findings)):
        if not findings[i].cost_ns or not len(rows[i]):
            continue
        for j in range(i + 1, len(findings)):
            if not findings[j].cost_ns or not len(rows[j]):
                continue
            common = np.intersect1d(rows[i], rows[j], assume_unique=True)
            at_once = _shared_ns(ts, dur, rows[i], rows[j])
            if len(common) or at_once:
                overlaps.append({"findings": [i + 1, j + 1], "kinds": [str(findings[i].kind), str(findings[j].kind)],
                                 "shared_events": int(len(common)), "shared_ns": int(at_once)})
    spread = [i + 1 for i, f in enumerate(findings) if f.kind in SPREAD_KINDS and f.cost_ns]
    note = None
    if total > 1.0:
        top = sorted(overlaps, key=lambda o: -o["shared_ns"])[:3]
        bits = [f"#{o['findings'][0]} {o['kinds'][0]} and #{o['findings'][1]} {o['kinds'][1]} count "
                + (f"the same {o['shared_events']} events, " if o["shared_events"] else "")
                + f"{fmt_ns(o['shared_ns'])} at once" for o in top]
        bits += [f"#{i} {findings[i - 1].kind} is time inside the others" for i in spread]
        note = (f"Shares add up to {total:.1%} of the wall time because findings overlap: "
                + ("; ".join(bits) if bits else "their time runs at once (on other threads or devices)"))
    return {"sum": round(total, 6), "overlaps": overlaps, "spread": spread, "note": note}
