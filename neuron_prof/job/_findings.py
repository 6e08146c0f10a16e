"""Cross-rank findings of a job, from the ranks' pieces alone (no rank is loaded here).

missing_rank       ranks of the world with no trace    } neuron_prof.merge.rank_coverage, from the
stopped_rank       a rank whose trace ends early       } ranks' first-pass infos (also in `merge`)
straggler          a rank arriving last at collectives, and what it did before (neuron_prof.analysis)
step_skew          steady step time differs across ranks (beyond each rank's own step-to-step variation)
rank_compiles      ranks compiling what (or more often than) the other ranks do not
rank_fallbacks     ranks falling back to the CPU where the others do not
collective_spread  the collectives whose arrival spread (first to last rank) costs most
ranks_to_open      the 2-3 ranks worth a timeline, with the `neuron-prof merge --ranks` command
"""

from __future__ import annotations

import shlex
from collections import Counter
from typing import Any

import numpy as np

from neuron_prof.analysis import Finding, Kind, LateArrivals, findings_from, fmt_ns, sort_findings
from neuron_prof.job._piece import RankPiece

SKEW_MIN = 0.05
"""Step-time skew below 5% of the median step is noise."""
TOP_COLLECTIVES = 3
MAX_OPEN = 3
_WHY_ORDER = (Kind.STOPPED_RANK, Kind.STRAGGLER, Kind.RANK_COMPILES, Kind.RANK_FALLBACKS, Kind.STEP_SKEW,
              Kind.COLLECTIVE_SPREAD)


def _severity(share: float, floor: str = "info") -> str:
    sev = "critical" if share > 0.2 else "warning" if share > 0.02 else "info"
    order = ("info", "warning", "critical")
    return max(sev, floor, key=order.index)


def step_skew(pieces: list[RankPiece]) -> list[Finding]:
    """One finding when the ranks' median steady step differs by more than SKEW_MIN."""
    med = {p.rank: int(np.median(p.step_ns)) for p in pieces if len(p.step_ns)}
    if len(med) < 2:
        return []
    typical = float(np.median(list(med.values())))
    slow = sorted(med, key=lambda r: -med[r])
    skew = (med[slow[0]] - med[slow[-1]]) / max(typical, 1)
    # a rank's step times vary from step to step too: slower than the others by less than its own
    # variation (half its p10-p90 range) is noise
    own = next(p.step_ns for p in pieces if p.rank == slow[0])
    jitter = float(np.percentile(own, 90) - np.percentile(own, 10)) / 2
    if skew < SKEW_MIN or med[slow[0]] - typical <= jitter:
        return []
    steps = int(np.median([len(p.step_ns) for p in pieces if len(p.step_ns)]))
    cost = int((med[slow[0]] - typical) * steps)
    wall = float(np.median([p.row["wall_ns"] for p in pieces])) or 1.0
    names = ", ".join(f"rank {r} {fmt_ns(med[r])}" for r in slow[:3])
    return [
        Finding(
            kind=Kind.STEP_SKEW,
            severity=_severity(cost / wall, "warning"),
            title=f"Steady step time differs by {skew:.0%} across ranks (median {fmt_ns(typical)}; slowest: {names})",
            cost_ns=cost,
            share=min(cost / wall, 1.0),
            count=len(med),
            advice="Open the slowest rank next to a typical one: what runs longer there (data, compiles, host work)?",
            evidence={
                "skew": skew,
                "median_step_ns": int(typical),
                "slowest_ranks": slow[:3],
                "step_median_ns_by_rank": {str(r): v for r, v in sorted(med.items())},
            },
            rank=slow[0],
        )
    ]


def _extra(counts: dict[int, dict[str, list[Any]]]) -> dict[int, dict[str, list[Any]]]:
    """Per rank, the keys it has more of than the median rank (absent counts as 0): [extra count, ns, ...]."""
    ranks = sorted(counts)
    keys = {k for c in counts.values() for k in c}
    out: dict[int, dict[str, list[Any]]] = {}
    for k in keys:
        n = np.array([counts[r][k][0] if k in counts[r] else 0 for r in ranks])
        typical = float(np.median(n))
        for r, c in zip(ranks, n):
            if c > typical:
                entry = counts[r][k]
                per = entry[1] / max(entry[0], 1)
                out.setdefault(r, {})[k] = [int(c - typical), int(per * (c - typical)), *entry[2:]]
    return out


def rank_differences(pieces: list[RankPiece], wall_ns: int) -> list[Finding]:
    """Ranks whose compiles or CPU fallbacks differ from the rest (more of a key than the median rank)."""
    if len(pieces) < 2:
        return []
    out: list[Finding] = []
    wall = max(wall_ns, 1)
    for kind, attr, what, advice in (
        (
            Kind.RANK_COMPILES,
            "compiles",
            "compiles",
            (
                "A rank compiling shapes the others do not (a different "
                "batch, a data-dependent shape) stalls every rank at the next collective: pad or bucket its inputs."
            ),
        ),
        (
            Kind.RANK_FALLBACKS,
            "fallbacks",
            "falls back to the CPU for",
            (
                "An op falling back on one rank only "
                "delays every collective: find the input that sends it there (dtype, shape) on that rank."
            ),
        ),
    ):
        extra = _extra({p.rank: getattr(p, attr) for p in pieces})
        for r, keys in sorted(extra.items()):
            n = sum(v[0] for v in keys.values())
            ns = sum(v[1] for v in keys.values())
            top = sorted(keys, key=lambda k: -keys[k][1])
            title = f"rank {r} {what} {n} more time(s) than the other ranks: {top[0]}" + (
                f" and {len(top) - 1} more" if len(top) > 1 else ""
            )
            site = next((str(keys[k][2]) for k in top if len(keys[k]) > 2 and keys[k][2]), "")
            out.append(
                Finding(
                    kind=kind,
                    severity=_severity(ns / wall, "warning"),
                    title=title,
                    cost_ns=ns,
                    share=min(ns / wall, 1.0),
                    count=n,
                    call_site=site,
                    advice=advice,
                    evidence={
                        "rank": r,
                        "extra": {k: {"count": keys[k][0], "ns": keys[k][1]} for k in top[:20]},
                    },
                    rank=r,
                )
            )
    return out


def collective_spread(late: LateArrivals | None, wall_ns: int) -> list[Finding]:
    """The TOP_COLLECTIVES collectives (group/op) whose significant arrival spreads add up to the most."""
    if late is None or not late.significant.any():
        return []
    sig = np.flatnonzero(late.significant)
    spread = late.spread
    last = np.argmax(late.start, axis=1)
    by_key: dict[str, list[int]] = {}
    for k in sig:
        by_key.setdefault(late.keys[int(k)], []).append(int(k))
    out = []
    for key, ks in sorted(by_key.items(), key=lambda kv: -int(spread[kv[1]].sum()))[:TOP_COLLECTIVES]:
        cost = int(spread[ks].sum())
        worst = ks[int(np.argmax(spread[ks]))]
        lasts = Counter(late.ranks[int(last[k])] for k in ks)
        often, times = lasts.most_common(1)[0]
        rows = np.array([i for i, k in enumerate(late.keys) if k == key])
        steady = late.systematic(often, rows)  # else the ranks take turns being last: jitter, nothing to fix
        out.append(
            Finding(
                kind=Kind.COLLECTIVE_SPREAD,
                severity=_severity(cost / max(wall_ns, 1)) if steady else "info",
                title=f"Collective {key}: ranks arrive up to {fmt_ns(spread[worst])} apart, {fmt_ns(cost)} over "
                f"{len(ks)} call(s); last most often: rank {often} ({times}x)" + ("" if steady else ", by turns"),
                cost_ns=cost,
                share=min(cost / max(wall_ns, 1), 1.0),
                count=len(ks),
                advice="Every rank waits for the last one at each call: see the straggler findings for why it is late.",
                evidence={
                    "collective": key,
                    "worst_spread_ns": int(spread[worst]),
                    "worst_index": worst,
                    "last_rank_counts": {str(r): c for r, c in sorted(lasts.items())},
                    "systematic": steady,
                },
                rank=often,
            )
        )
    return out


def steady_only(late: LateArrivals | None, steady_start_ns: int | None) -> LateArrivals | None:
    """The collectives every rank reaches after the job's warm-up (None when none are left).

    Warm-up arrivals are spread by ranks starting their profilers and first compiles at different moments:
    a wait at the first collective is not what slows the steady job down."""
    if late is None or steady_start_ns is None:
        return late
    keep = late.start.min(axis=1) >= steady_start_ns
    if not keep.any():
        return late
    return LateArrivals(
        ranks=late.ranks,
        keys=[k for k, m in zip(late.keys, keep) if m],
        start=late.start[keep],
        end=late.end[keep],
        explained=late.explained[keep] if late.explained is not None else None,
    )


def stragglers(
    late: LateArrivals | None, causes: dict[int, dict[str, object]], wall_ns: int
) -> list[Finding]:
    """Straggler findings (neuron_prof.analysis) for the late ranks whose cause was read."""
    return findings_from(late, causes, wall_ns) if late is not None else []


def ranks_to_open(pieces: list[RankPiece], found: list[Finding], args: list[str]) -> Finding | None:
    """The ranks worth a timeline: the most costly flagged ranks, then a typical rank to compare with."""
    if len(pieces) < 2:
        return None
    why: dict[int, str] = {}
    # a rank that stopped early first (where it stopped is the first thing to see), then the most costly of
    # the warnings and criticals, then of the notes (ranks taking turns at arriving last are jitter, not a cause)
    for f in sorted(sort_findings(found), key=lambda f: (f.kind != Kind.STOPPED_RANK, f.severity == "info")):
        if f.rank is not None and f.rank not in why and len(why) < MAX_OPEN - 1:
            why[f.rank] = str(f.kind)
    for f in found:  # name a rank by what it does (a straggler) rather than by the collective it delays
        if f.rank in why and f.kind in _WHY_ORDER and why[f.rank] in _WHY_ORDER and (
                _WHY_ORDER.index(f.kind) < _WHY_ORDER.index(why[f.rank])):
            why[f.rank] = str(f.kind)
    with_steps = [p for p in pieces if len(p.step_ns)]
    by_step = sorted(with_steps or pieces, key=lambda p: float(np.median(p.step_ns)) if len(p.step_ns) else 0)
    typical = next((p.rank for p in by_step[len(by_step) // 2 :] + by_step if p.rank not in why), None)
    if typical is not None:
        why[typical] = "typical rank (to compare)"
    ranks = sorted(why)
    cmd = shlex.join(
        ["neuron-prof", "merge", "--ranks", ",".join(map(str, ranks)), *args, "-o", "merged.pftrace"]
    )
    return Finding(
        kind=Kind.RANKS_TO_OPEN,
        severity="info",
        title=f"Open ranks {', '.join(map(str, ranks))} on one timeline: {cmd}",
        cost_ns=0,
        share=0.0,
        count=len(ranks),
        advice="The command merges only these ranks, their clocks aligned from every rank's collectives.",
        evidence={"ranks": ranks, "why": {str(r): w for r, w in sorted(why.items())}, "command": cmd},
    )
