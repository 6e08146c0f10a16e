"""Stragglers: who arrived late at each collective, how long the others waited, and what the late rank did.

Works on a trace holding several ranks (a `neuron-prof merge` result, clocks aligned). For every
collective matched across ranks, arrival spread = last start - first start; each rank waits
(last start - its start). The late rank's cause is read from what it was doing just before it arrived.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.analysis._collective_match import RankCollectives, extract_collectives, match
from neuron_prof.analysis._context import Context
from neuron_prof.analysis._finding import Finding
from neuron_prof.analysis._registry import register
from neuron_prof.model import Trace, TrackKind

MIN_SPREAD_NS = 1_000_000
"""Spreads under 1 ms (or under half the collective's own duration) are noise, not stragglers."""

_CAUSE_KINDS = ((TrackKind.COMPILE, "a compile stall"), (TrackKind.FALLBACK, "a CPU fallback"),
                (TrackKind.SYNC, "a host wait on the device"))
_NOT_WORK = ("ProfilerStep", "PyTorch Profiler", "Iteration Start")
"""Spans of the profiler itself or of whole steps: never a straggler's cause."""
_DATA_WORDS = ("dataloader", "data_loader", "__next__", "collate", "load_batch")


def _overlap(trace: Trace, rows: np.ndarray, t0: int, t1: int) -> np.ndarray:
    s = trace.slices.ts_ns[rows]
    e = s + trace.slices.dur_ns[rows]
    return np.clip(np.minimum(e, t1) - np.maximum(s, t0), 0, None)


def _cause(trace: Trace, rank: int, t0: int, t1: int) -> dict[str, object]:
    """What `rank` spent [t0, t1] on: a probe event kind, data loading, or its longest host op."""
    procs = {i for i, p in enumerate(trace.processes) if (p.rank or 0) == rank}
    best: dict[str, object] = {"cause": "host work", "detail": "", "ns": 0}
    for kind, label in _CAUSE_KINDS:
        tids = [i for i, t in enumerate(trace.tracks) if t.kind == kind and t.process in procs]
        rows = np.flatnonzero(np.isin(trace.slices.track, tids))
        if not len(rows):
            continue
        ov = _overlap(trace, rows, t0, t1)
        if ov.sum() > int(best["ns"]):  # type: ignore[arg-type]
            top = int(rows[np.argmax(ov)])
            a = trace.slice_args(top)
            best = {"cause": label, "detail": trace.slice_name(top), "ns": int(ov.sum()),
                    "call_site": a.get("call_site", ""), "module": a.get("module", "")}
    if int(best["ns"]) > 0.2 * (t1 - t0):  # type: ignore[arg-type]
        return best
    tids = [i for i, t in enumerate(trace.tracks) if t.kind == TrackKind.THREAD and t.process in procs]
    rows = np.flatnonzero(np.isin(trace.slices.track, tids))
    if len(rows):
        ov = _overlap(trace, rows, t0, t1)
        names = trace.slices.name[rows]
        for uid in np.unique(names[ov > 0]):
            n = trace.strings[int(uid)]
            if any(w in n.lower() for w in _DATA_WORDS):
                ns = int(ov[names == uid].sum())
                if ns > 0.2 * (t1 - t0):
                    return {"cause": "data loading", "detail": n, "ns": ns}
        # the longest non-step host op inside the window
        keep = ov > 0
        cand = [(int(ov[i]), int(rows[i])) for i in np.flatnonzero(keep)
                if not trace.slice_name(int(rows[i])).startswith(_NOT_WORK)]
        if cand and int(best["ns"]) == 0:
            ns, row = max(cand)
            return {"cause": "host work", "detail": trace.slice_name(row), "ns": ns}
    return best


@register("straggler")
def stragglers(trace: Trace, ctx: Context) -> list[Finding]:
    """Registered analysis: straggler findings of a multi-rank trace (none for a single rank)."""
    return straggler_findings(trace)


def straggler_findings(trace: Trace) -> list[Finding]:
    """One finding per rank that arrived late at collectives, most costly first."""
    if not _matches_trusted(trace):
        return []
    per_rank: dict[int, RankCollectives] = extract_collectives(trace)
    ranks, mat = match(per_rank)
    if len(ranks) < 2 or not len(mat):
        return []
    S = np.stack([per_rank[r].start_ns[mat[:, j]] for j, r in enumerate(ranks)], axis=1)
    E = np.stack([per_rank[r].end_ns[mat[:, j]] for j, r in enumerate(ranks)], axis=1)
    last = S.max(axis=1)
    spread = last - S.min(axis=1)
    late = np.argmax(S, axis=1)
    dur = np.median(E - S, axis=1)
    significant = spread > np.maximum(MIN_SPREAD_NS, 0.5 * (E.max(axis=1) - last))
    wall = max(trace.wall_ns, 1)
    out: list[Finding] = []
    for j, r in enumerate(ranks):
        ks = np.flatnonzero(significant & (late == j))
        if not len(ks):
            continue
        cost = int(spread[ks].sum())
        worst = int(ks[np.argmax(spread[ks])])
        cause = _dominant_cause(trace, r, [(int(E[k - 1, j]) if k > 0 else int(S[k, j] - 2 * spread[k]),
                                             int(S[k, j]), int(spread[k])) for k in ks])
        waits = {str(rr): int((last[ks] - S[ks, jj]).sum()) for jj, rr in enumerate(ranks) if rr != r}
        share = cost / wall
        detail = f" ({cause['detail']})" if cause.get("detail") else ""
        out.append(Finding(
            kind="straggler", severity="critical" if share > 0.2 else "warning" if share > 0.02 else "info",
            title=f"rank {r} arrives last at {len(ks)} collective(s), up to {spread[worst] / 1e6:.1f} ms late: "
                  f"{cause['cause']}{detail}",
            cost_ns=cost, share=share, count=len(ks), call_site=str(cause.get("call_site", "") or ""),
            module=str(cause.get("module", "") or ""),
            advice=_advice(str(cause["cause"])),
            evidence={"late_rank": r, "ranks": ranks, "wait_ns_by_rank": waits,
                      "spread_ns": [int(x) for x in spread[ks][:50]],
                      "collectives": [per_rank[r].key[int(mat[k, j])] for k in ks[:50]],
                      "median_collective_ns": int(np.median(dur[ks])), "cause": cause,
                      "worst_start_ns": int(S[worst, j])},
            ts_ns=int(S[worst, j]), rank=r))
    return sorted(out, key=lambda f: -f.cost_ns)


def _dominant_cause(trace: Trace, rank: int, windows: list[tuple[int, int, int]]) -> dict[str, object]:
    """The cause seen most often over the late arrivals (prev exit, arrival, spread); ties go to more time.

    One arrival can be odd (the first collective, while a profiler was still starting): what the rank did
    before most of its late arrivals is the cause."""
    tally: dict[tuple[str, str], list[Any]] = {}
    for prev_end, arrival, spread in windows:
        c = _cause(trace, rank, max(prev_end, arrival - 4 * spread), arrival)
        key = (str(c["cause"]), str(c.get("detail", "")))
        entry = tally.setdefault(key, [0, 0, c])
        entry[0] += 1
        entry[1] += int(c["ns"])  # type: ignore[call-overload]
    count, ns, best = max(tally.values(), key=lambda e: (e[0], e[1]))
    return {**best, "ns": ns, "arrivals": count}


def _matches_trusted(trace: Trace) -> bool:
    """False when the merge found that the ranks' collectives do not correspond (e.g. sampled traces)."""
    offsets = (trace.metadata.get("alignment") or {}).get("offsets") or {}
    return not any(o.get("method") == "recorded" and o.get("matched", 0) > 0 for o in offsets.values())


def _advice(cause: str) -> str:
    return {
        "a compile stall": "Warm up every shape before timing (or share a NEFF cache dir across ranks) so no rank "
                           "compiles while the others wait.",
        "a CPU fallback": "Replace the op that falls back to the CPU on this rank; its host time delays every "
                          "collective.",
        "a host wait on the device": "Remove the sync point (.item(), .cpu(), print) before the collective on "
                                     "this rank.",
        "data loading": "Load data ahead of time (more DataLoader workers, prefetch, pinned buffers) on this rank.",
    }.get(cause, "Balance the work between ranks; look at what this rank runs just before the collective.")
