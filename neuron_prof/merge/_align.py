"""Clock alignment of ranks from their collectives: ranks leave a collective at nearly the same moment.

For every rank r against the reference rank (the lowest), offset_r = median over matched collectives of
(end_ref - end_r). The residuals after the shift give the uncertainty. When the collectives do not agree
(too few, or the residuals are far larger than the collectives themselves, as in sampled traces whose
collectives do not correspond), clocks that are already Unix time are kept as recorded and the report says so.

Ranks captured on the reference rank's machine share its Unix clock: their offset is 0 ("host_clock"). Their
collectives' exits need not agree: a collective launched asynchronously (DDP's gradient all-reduce on gloo) is
recorded where the host issued it, and a late rank's issue ends later; aligning those exits would shift the
late rank's lateness away.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from neuron_prof.analysis import RankCollectives, match

MIN_MATCHES = 2
"""Fewer matched collectives than this and the estimate is not trusted."""
TOLERANCE_NS = 100_000
"""Residuals below this (or a quarter of the median collective on the rank or the reference, whichever waits
longer in it, or GAP_FRACTION of the median spacing between collectives) count as agreement."""
GAP_FRACTION = 0.05


@dataclass(frozen=True)
class RankOffset:
    rank: int
    offset_ns: int
    """Added to every timestamp of this rank."""
    method: str
    """"collectives", "user", "recorded" (kept as is), "host_clock" (the reference's machine) or "reference"."""
    matched: int = 0
    uncertainty_ns: int | None = None
    """90th percentile of |residual| after alignment; None when unknown."""
    note: str = ""


@dataclass(frozen=True)
class Alignment:
    reference_rank: int
    offsets: dict[int, RankOffset] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {"reference_rank": self.reference_rank,
                "offsets": {str(r): vars(o) for r, o in sorted(self.offsets.items())}}


def estimate_offsets(per_rank: dict[int, RankCollectives], user: dict[int, int] | None = None,
                     hosts: dict[int, str] | None = None) -> Alignment:
    """Offsets for every rank in `per_rank` (user-given offsets win; `hosts`: rank -> the machine whose Unix clock
    its times are on, "" when unknown)."""
    user, hosts = user or {}, hosts or {}
    ranks, mat = match(per_rank)
    ref = ranks[0] if ranks else 0
    out: dict[int, RankOffset] = {ref: RankOffset(ref, int(user.get(ref, 0)), "user" if ref in user else "reference",
                                                  len(mat), 0)}
    for j, r in enumerate(ranks[1:], start=1):
        if r in user:
            out[r] = RankOffset(r, int(user[r]), "user", len(mat), None, "given by the user")
            continue
        if hosts.get(r) and hosts.get(r) == hosts.get(ref) and ref not in user:
            out[r] = RankOffset(r, 0, "host_clock", len(mat), 0, f"on rank {ref}'s machine ({hosts[r]}): one clock")
            continue
        if len(mat) < MIN_MATCHES:
            out[r] = RankOffset(r, 0, "recorded", len(mat), None,
                                f"only {len(mat)} collective(s) matched rank {ref}; clock kept as recorded")
            continue
        end_ref = per_rank[ref].end_ns[mat[:, 0]]
        end_r = per_rank[r].end_ns[mat[:, j]]
        deltas = (end_ref - end_r).astype(np.int64)
        off = int(np.median(deltas))
        resid = np.abs(deltas - off)
        # the collective as long as the waiting rank sees it: a late rank barely waits in its collectives
        dur = max(np.median(per_rank[r].end_ns[mat[:, j]] - per_rank[r].start_ns[mat[:, j]]),
                  np.median(per_rank[ref].end_ns[mat[:, 0]] - per_rank[ref].start_ns[mat[:, 0]]))
        gap = np.median(np.diff(np.sort(end_ref))) if len(end_ref) > 1 else 0
        # Host-measured exits jitter by scheduling (ms on a loaded machine); what must not happen is a
        # residual comparable to the spacing of collectives, which means they were matched wrongly.
        tol = max(TOLERANCE_NS, 0.25 * float(dur), GAP_FRACTION * float(gap))
        if float(np.median(resid)) > tol:
            out[r] = RankOffset(r, 0, "recorded", len(mat), None,
                                f"collectives disagree (median residual {np.median(resid) / 1e6:.3f} ms): "
                                "clock kept as recorded")
            continue
        inliers = resid <= max(tol, 3 * float(np.median(resid)))
        off = int(np.median(deltas[inliers]))
        unc = int(np.percentile(np.abs(deltas[inliers] - off), 90))
        out[r] = RankOffset(r, off, "collectives", int(inliers.sum()), unc)
    for r, v in user.items():
        if r not in out:
            out[r] = RankOffset(r, int(v), "user", 0, None, "given by the user")
    return Alignment(ref, out)
