"""Exact padding-bucket planner for shape churn.

Given the distinct sizes a dimension took and how often each occurred, choose k bucket sizes so that
every size is padded up to the smallest bucket >= it. With k buckets there are k compiles; the padded
waste is sum(count * (bucket - size)). An optimal bucket set always consists of observed sizes (each
bucket can shrink to the largest size it serves) and includes the largest size.

`min_waste(sizes, counts, k)` solves every k' <= k exactly by dynamic programming over the sorted
sizes. The inner minimum, over the previous cut i, of dp[i] + S[i] - s_j * C[i], is a lower envelope
of lines queried at increasing s_j with decreasing slopes, so a monotone convex-hull queue gives
O(k n) with exact integer arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class BucketPlan:
    """k buckets for one dimension."""

    buckets: tuple[int, ...]
    waste: int
    """Padded elements: sum of count * (bucket - size)."""
    total: int
    """Real elements: sum of count * size."""
    compiles_before: int
    """Distinct sizes seen (one compile each without bucketing)."""

    @property
    def k(self) -> int:
        return len(self.buckets)

    @property
    def waste_share(self) -> float:
        """Padded elements as a fraction of the real ones."""
        return self.waste / self.total if self.total else 0.0

    def describe(self) -> str:
        """E.g. "37 compiles -> 4 buckets [128, 256, 384, 512], +9% padded"."""
        return (
            f"{self.compiles_before} compiles -> {self.k} bucket{'s' if self.k != 1 else ''} "
            f"{list(self.buckets)}, +{self.waste_share:.0%} padded"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "buckets": list(self.buckets),
            "k": self.k,
            "waste": self.waste,
            "total": self.total,
            "waste_share": round(self.waste_share, 6),
            "compiles_before": self.compiles_before,
        }


def _prepare(sizes: Sequence[int], counts: Sequence[int] | None) -> tuple[list[int], list[int], int]:
    """Sorted distinct sizes with count > 0, their counts, and the number of distinct sizes seen."""
    agg: dict[int, int] = {}
    for i, s in enumerate(sizes):
        c = 1 if counts is None else int(counts[i])
        if c < 0:
            raise ValueError("counts must be >= 0")
        agg[int(s)] = agg.get(int(s), 0) + c
    keys = [k for k in sorted(agg) if agg[k] > 0]  # a size never run costs no padding
    return keys, [agg[k] for k in keys], len(agg)


def min_waste_table(sizes: Sequence[int], counts: Sequence[int] | None, kmax: int) -> list[BucketPlan]:
    """The optimal plan for every k = 1..min(kmax, distinct sizes); exact."""
    s, c, seen = _prepare(sizes, counts)
    n = len(s)
    if n == 0 or kmax < 1:
        return []
    kmax = min(kmax, n)
    C = [0] * (n + 1)  # prefix count
    S = [0] * (n + 1)  # prefix count*size
    for i in range(n):
        C[i + 1] = C[i] + c[i]
        S[i + 1] = S[i] + c[i] * s[i]
    # dp[j]: least waste covering sizes[0:j] (its last bucket is s[j-1]); one bucket covers all before it
    dp: list[int | None] = [None] + [s[j - 1] * C[j] - S[j] for j in range(1, n + 1)]
    dps, cuts = [dp], [[0] * (n + 1)]
    for level in range(1, kmax):
        prev = dps[-1]
        cur: list[int | None] = [None] * (n + 1)
        cut = [0] * (n + 1)
        hm: list[int] = []  # hull slopes (strictly decreasing: -C[i] with every count > 0)
        hq: list[int] = []
        hi: list[int] = []
        head = 0
        for j in range(level + 1, n + 1):
            i = j - 1  # the newest cut becomes usable
            pi = prev[i]
            if pi is not None:
                m, q = -C[i], pi + S[i]
                # drop the last line when the new one overtakes its predecessor no later than it does
                while len(hm) - head >= 2 and (q - hq[-2]) * (hm[-2] - hm[-1]) <= (hq[-1] - hq[-2]) * (
                    hm[-2] - m
                ):
                    del hm[-1], hq[-1], hi[-1]
                hm.append(m)
                hq.append(q)
                hi.append(i)
            if len(hm) <= head:
                continue
            x = s[j - 1]
            while head + 1 < len(hm) and hm[head + 1] * x + hq[head + 1] <= hm[head] * x + hq[head]:
                head += 1
            cur[j] = hm[head] * x + hq[head] + x * C[j] - S[j]
            cut[j] = hi[head]
        dps.append(cur)
        cuts.append(cut)
    plans = []
    for level in range(kmax):
        b, j = [], n
        for lv in range(level, -1, -1):
            b.append(s[j - 1])
            j = cuts[lv][j]
        plans.append(BucketPlan(tuple(reversed(b)), int(dps[level][n]), S[n], seen))  # type: ignore[arg-type]
    return plans


def plan_buckets(sizes: Sequence[int], counts: Sequence[int] | None = None, k: int = 4) -> BucketPlan:
    """The k buckets (k capped at the number of distinct sizes) with the least padded waste; exact."""
    table = min_waste_table(sizes, counts, k)
    if not table:
        raise ValueError("no sizes to plan buckets for")
    return table[-1]


def choose_plan(
    sizes: Sequence[int],
    counts: Sequence[int] | None = None,
    *,
    compile_cost: float = 0.0,
    element_cost: float = 0.0,
    max_waste_share: float = 0.10,
    kmax: int = 16,
) -> BucketPlan:
    """The plan minimising k*compile_cost + waste*element_cost when both costs are known (> 0);
    otherwise the fewest buckets whose padded waste is at most `max_waste_share` of the real elements."""
    table = min_waste_table(sizes, counts, kmax)
    if not table:
        raise ValueError("no sizes to plan buckets for")
    if compile_cost > 0 and element_cost > 0:
        return min(table, key=lambda p: (p.k * compile_cost + p.waste * element_cost, p.k))
    for p in table:
        if p.waste_share <= max_waste_share:
            return p
    return table[-1]


@dataclass(frozen=True)
class ShapePlan:
    """Buckets for every dimension of one tensor that varies: the plan that leaves one signature per bucket
    combination, and what it pads over the shapes that ran."""

    dims: tuple[tuple[int, BucketPlan, bool], ...]
    """(dimension index, its plan, whether it is a last smaller batch: one smaller size, once)."""
    shapes_before: int
    """Distinct shapes that ran (one compile each per op without bucketing)."""
    shapes_after: int
    """Distinct bucketed shapes the same calls would have."""
    waste_share: float
    """Padded elements over the real ones, all dimensions together."""

    def pad(self, shape: Sequence[int]) -> tuple[int, ...]:
        """`shape` padded up to its buckets."""
        out = list(shape)
        for i, p, _ in self.dims:
            out[i] = next((b for b in p.buckets if b >= out[i]), out[i])
        return tuple(out)

    def to_dict(self) -> dict[str, object]:
        return {"dims": [{"index": i, "last_batch": last, **p.to_dict()} for i, p, last in self.dims],
                "shapes_before": self.shapes_before, "shapes_after": self.shapes_after,
                "waste_share": round(self.waste_share, 6)}


def plan_shapes(shapes: dict[tuple[int, ...], int], *, max_waste_share: float = 0.10) -> ShapePlan | None:
    """A bucket plan for each dimension of one tensor that took several sizes (`shapes`: shape -> calls).

    Each dimension gets `choose_plan`'s buckets, except a last smaller batch (one size below the others, seen
    once, as a DataLoader's remainder): it gets the larger size only (pad it, or drop it with drop_last=True),
    because a bucket of its own is one more compile of every op for one call. None when nothing varies."""
    by_rank: dict[int, dict[tuple[int, ...], int]] = {}
    for sh, n in shapes.items():
        by_rank.setdefault(len(sh), {})[tuple(sh)] = n
    if not by_rank:
        return None
    shapes = max(by_rank.values(), key=lambda d: (sum(d.values()), len(d)))
    rank = len(next(iter(shapes)))
    dims: list[tuple[int, BucketPlan, bool]] = []
    for i in range(rank):
        per: dict[int, int] = {}
        for sh, n in shapes.items():
            per[sh[i]] = per.get(sh[i], 0) + n
        if len(per) < 2:
            continue
        sizes, counts = list(per), [per[s] for s in per]
        small = min(per)
        last = len(per) == 2 and per[small] == 1 and sum(counts) > 2
        plan = min_waste_table(sizes, counts, 1)[0] if last else choose_plan(
            sizes, counts, max_waste_share=max_waste_share)
        dims.append((i, plan, last))
    if not dims:
        return None
    sp = ShapePlan(tuple(dims), len(shapes), 0, 0.0)
    real = padded = 0
    after: set[tuple[int, ...]] = set()
    for sh, n in shapes.items():
        b = sp.pad(sh)
        after.add(b)
        r = p = n
        for x, y in zip(sh, b, strict=True):
            r, p = r * x, p * y
        real, padded = real + r, padded + p
    return ShapePlan(tuple(dims), len(shapes), len(after), (padded - real) / real if real else 0.0)
