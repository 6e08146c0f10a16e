"""Stragglers: who arrived late at each collective, how long the others waited, and what the late rank did.

Works on a trace holding several ranks (a `neuron-prof merge` result, clocks aligned). For every
collective matched across ranks, arrival spread = last start - first start; each rank waits
(last start - its start). The late rank's cause is read from what it was doing just before it arrived.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from neuron_prof.analysis.collectives.match import RankCollectives, extract_collectives, match
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.finding import Finding
from neuron_prof.analysis.kinds import Kind
from neuron_prof.analysis.registry import register
from neuron_prof.model import Trace, TrackKind
from neuron_prof.model.callsite import parse_frame
from neuron_prof.model.order import sorted_unique

MIN_SPREAD_NS = 1_000_000
"""Spreads under 1 ms (or under half the collective's own duration) are noise, not stragglers."""

_CAUSE_KINDS = ((TrackKind.COMPILE, "a compile stall"), (TrackKind.FALLBACK, "a CPU fallback"),
                (TrackKind.SYNC, "a host wait on the device"))
_NOT_WORK = ("ProfilerStep", "PyTorch Profiler", "Iteration Start")
"""Spans of the profiler itself or of whole steps: never a straggler's cause."""
_DATA_WORDS = ("dataloader", "data_loader", "__next__", "collate", "load_batch")
CHANCE_P = 0.05
"""A rank is late *systematically* when arriving last at so many of the significant spreads has a chance under
CHANCE_P if every rank were as likely to be last (one-sided binomial): ranks that take turns being last (a
loaded machine's scheduling, two busy ranks on shared cores) are jitter, not a straggler to fix."""


def _overlap(trace: Trace, rows: np.ndarray, t0: int, t1: int) -> np.ndarray:
    s = trace.slices.ts_ns[rows]
    e = s + trace.slices.dur_ns[rows]
    return np.clip(np.minimum(e, t1) - np.maximum(s, t0), 0, None)


def _cause(trace: Trace, rank: int, t0: int, t1: int) -> dict[str, object]:
    """What `rank` spent [t0, t1] on: a probe event kind, data loading, or its longest host op."""
    procs = {i for i, p in enumerate(trace.processes) if (p.rank or 0) == rank}
    best: dict[str, Any] = {"cause": "host work", "detail": "", "ns": 0}
    for kind, label in _CAUSE_KINDS:
        tids = [i for i, t in enumerate(trace.tracks) if t.kind == kind and t.process in procs]
        rows = np.flatnonzero(np.isin(trace.slices.track, tids))
        if not len(rows):
            continue
        ov = _overlap(trace, rows, t0, t1)
        if ov.sum() > int(best["ns"]):
            top = int(rows[np.argmax(ov)])
            a = trace.slice_args(top)
            best = {"cause": label, "detail": trace.slice_name(top), "ns": int(ov.sum()),
                    "call_site": a.get("call_site", ""), "module": a.get("module", "")}
    if int(best["ns"]) > 0.2 * (t1 - t0):
        return best
    tids = [i for i, t in enumerate(trace.tracks) if t.kind == TrackKind.THREAD and t.process in procs]
    rows = np.flatnonzero(np.isin(trace.slices.track, tids))
    if len(rows):
        ov = _overlap(trace, rows, t0, t1)
        names = trace.slices.name[rows]
        for uid in sorted_unique(names[ov > 0]):
            n = trace.strings[int(uid)]
            if any(w in n.lower() for w in _DATA_WORDS):
                ns = int(ov[names == uid].sum())
                if ns > 0.2 * (t1 - t0):
                    row = int(rows[names == uid][np.argmax(ov[names == uid])])
                    return {"cause": "data loading", "detail": _function(n), "ns": ns,
                            "call_site": _costly_line(trace, row, rows, t0, t1)}
        # the longest non-step host op inside the window
        keep = ov > 0
        cand = [(int(ov[i]), int(rows[i])) for i in np.flatnonzero(keep)
                if not trace.slice_name(int(rows[i])).startswith(_NOT_WORK)]
        if cand and int(best["ns"]) == 0:
            ns, row = max(cand)
            return {"cause": "host work", "detail": _function(trace.slice_name(row)), "ns": ns,
                    "call_site": _costly_line(trace, row, rows, t0, t1)}
    return best


def _function(name: str) -> str:
    """A Python frame span's function ("ddp_train.py(22): load_batch" -> "load_batch"): its def line is no
    line of the cause; other names as they are."""
    f = parse_frame(name)
    return f[2] if f is not None else name


def _costly_line(trace: Trace, row: int, rows: np.ndarray, t0: int, t1: int) -> str:
    """The user's line that cost the most of [t0, t1] inside host slice `row`: of the calls the user's code
    made in it (their ``call_site``: the ``time.sleep`` in ``load_batch``), the one overlapping the window
    most; else the line that called `row` itself (the loop's line); "" when neither is recorded."""
    sl = trace.slices
    a, e = int(sl.ts_ns[row]), int(sl.ts_ns[row] + sl.dur_ns[row])
    inner = rows[(sl.track[rows] == sl.track[row]) & (sl.ts_ns[rows] >= a) & (sl.ts_ns[rows] + sl.dur_ns[rows] <= e)]
    best, site = 0, ""
    for r, ns in zip(inner.tolist(), _overlap(trace, inner, t0, t1).tolist(), strict=True):
        if r == row or ns <= best:
            continue
        cs = trace.slice_args(int(r)).get("call_site")
        if cs:
            best, site = int(ns), str(cs)
    return site or str(trace.slice_args(row).get("call_site") or "")


@register(Kind.STRAGGLER)
def stragglers(trace: Trace, ctx: Context) -> list[Finding]:
    """Registered analysis: straggler findings of a multi-rank trace (none for a single rank)."""
    return straggler_findings(trace)


def straggler_findings(trace: Trace) -> list[Finding]:
    """One finding per rank that arrived late at collectives, most costly first."""
    if not _matches_trusted(trace):
        return []
    late = late_arrivals(extract_collectives(trace))
    if late is None:
        return []
    causes = {r: dominant_cause(trace, r, late.windows(r)) for r in late.late_ranks()}
    return findings_from(late, causes, trace.wall_ns)


@dataclass(frozen=True)
class LateArrivals:
    """The collectives matched across ranks (clocks aligned) and who arrived last at each."""

    ranks: list[int]
    keys: list[str]
    """"group/op" of each matched collective."""
    start: np.ndarray
    """(n_matched, n_ranks) start of each collective on each rank."""
    end: np.ndarray
    explained: np.ndarray | None = None
    """(n_matched,) of each spread, what the last rank's host run-queue wait explains (`with_host_waits`); None
    when the ranks' traces hold no run-queue samples."""

    @property
    def spread(self) -> np.ndarray:
        return self.start.max(axis=1) - self.start.min(axis=1)

    @property
    def host_wait(self) -> np.ndarray:
        """Of each spread, what the last rank's extra run-queue wait explains (0 without samples)."""
        return np.zeros(len(self.keys), dtype=np.int64) if self.explained is None else self.explained

    def _over(self, spread: np.ndarray) -> np.ndarray:
        """Spreads over MIN_SPREAD_NS and over half of what is left of the collective after the last arrival."""
        return spread > np.maximum(MIN_SPREAD_NS, 0.5 * (self.end.max(axis=1) - self.start.max(axis=1)))

    @property
    def significant(self) -> np.ndarray:
        """Spreads that count: what the last rank's host run-queue wait leaves of the spread (a busy machine that
        did not schedule the rank is no straggler) is significant (`_over`)."""
        return self._over(self.spread - self.host_wait)

    def late_rows(self, rank: int) -> np.ndarray:
        """Matched collectives where `rank` arrived last by a significant spread."""
        j = self.ranks.index(rank)
        return np.flatnonzero(self.significant & (np.argmax(self.start, axis=1) == j))

    def late_ranks(self) -> list[int]:
        return [r for r in self.ranks if len(self.late_rows(r))]

    def systematic(self, rank: int, rows: np.ndarray | None = None) -> bool:
        """Whether `rank` arrives last at the significant spreads (of `rows`, default all) more often than chance
        would make it (`CHANCE_P`): a straggler, or a collective's spread with a cause to look for. Counted over
        the spreads significant before the host's run-queue wait is taken out: a rank last where the wait explains
        it still took its turn (else explaining one rank's late arrivals would make the other's look steady)."""
        raw = self._over(self.spread)
        sig = np.flatnonzero(raw) if rows is None else np.asarray(rows)[raw[rows]]
        n = len(sig)
        last = int((np.argmax(self.start[sig], axis=1) == self.ranks.index(rank)).sum()) if n else 0
        return last > 0 and chance_of_last(last, n, len(self.ranks)) < CHANCE_P

    def windows(self, rank: int) -> list[tuple[int, int, int]]:
        """(previous collective's exit, arrival, spread) of each late arrival of `rank`: where to look for why."""
        j, spread = self.ranks.index(rank), self.spread
        return [(int(self.end[k - 1, j]) if k > 0 else int(self.start[k, j] - 2 * spread[k]),
                 int(self.start[k, j]), int(spread[k])) for k in self.late_rows(rank)]


def late_arrivals(per_rank: dict[int, RankCollectives]) -> LateArrivals | None:
    """Match `per_rank`'s collectives (clocks already aligned); None when fewer than two ranks share any."""
    ranks, mat = match(per_rank)
    if len(ranks) < 2 or not len(mat):
        return None
    return LateArrivals(
        ranks=ranks, keys=[per_rank[ranks[0]].key[int(i)] for i in mat[:, 0]],
        start=np.stack([per_rank[r].start_ns[mat[:, j]] for j, r in enumerate(ranks)], axis=1),
        end=np.stack([per_rank[r].end_ns[mat[:, j]] for j, r in enumerate(ranks)], axis=1))


def findings_from(late: LateArrivals, causes: dict[int, dict[str, object]], wall_ns: int) -> list[Finding]:
    """The straggler findings, given each late rank's cause (`dominant_cause` over `late.windows(rank)`)."""
    S, E, ranks = late.start, late.end, late.ranks
    last = S.max(axis=1)
    spread = late.spread
    dur = np.median(E - S, axis=1)
    wall = max(wall_ns, 1)
    out: list[Finding] = []
    for j, r in enumerate(ranks):
        ks = late.late_rows(r)
        if not len(ks) or r not in causes:
            continue
        cost = int(spread[ks].sum())
        worst = int(ks[np.argmax(spread[ks])])
        cause = causes[r]
        waits = {str(rr): int((last[ks] - S[ks, jj]).sum()) for jj, rr in enumerate(ranks) if rr != r}
        share = cost / wall
        detail = f" ({cause['detail']})" if cause.get("detail") else ""
        steady = late.systematic(r)
        jitter = "" if steady else f" (of {int(late.significant.sum())}: the ranks take turns, jitter)"
        out.append(Finding(
            kind=Kind.STRAGGLER, severity="info" if not steady else "critical" if share > 0.2 else
            "warning" if share > 0.02 else "info",
            title=f"rank {r} arrives last at {len(ks)} collective(s){jitter}, up to {spread[worst] / 1e6:.1f} ms "
                  f"late: {cause['cause']}{detail}",
            # jitter has no line to fix: what the rank did stays in evidence.cause, but the finding names
            # no line (the exact-line rule: a finding's site is where its problem is)
            cost_ns=cost, share=share, count=len(ks),
            call_site=str(cause.get("call_site", "") or "") if steady else "",
            module=str(cause.get("module", "") or "") if steady else "",
            advice=_advice(str(cause["cause"])),
            evidence={"late_rank": r, "ranks": ranks, "wait_ns_by_rank": waits,
                      "spread_ns": [int(x) for x in spread[ks][:50]],
                      "collectives": [late.keys[int(k)] for k in ks[:50]],
                      "median_collective_ns": int(np.median(dur[ks])), "cause": cause, "systematic": steady,
                      "host_wait_ns": int(late.host_wait[ks].sum()),
                      "worst_start_ns": int(S[worst, j])},
            ts_ns=int(S[worst, j]), rank=r))
    return sorted(out, key=lambda f: -f.cost_ns)


def chance_of_last(last: int, n: int, ranks: int) -> float:
    """The chance that one of `ranks` equally likely ranks is last at `last` or more of `n` collectives."""
    p = 1.0 / max(ranks, 1)
    return float(sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(last, n + 1)))


def dominant_cause(trace: Trace, rank: int, windows: list[tuple[int, int, int]]) -> dict[str, object]:
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
