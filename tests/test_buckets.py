"""The padding-bucket planner is exact (checked against brute force) and fast on thousands of sizes."""

from __future__ import annotations

import itertools
import random
import time

import pytest

from neuron_prof.analysis.compile.buckets import BucketPlan, choose_plan, min_waste_table, plan_buckets


def brute(sizes: list[int], counts: list[int], k: int) -> int:
    """Least waste over all bucket sets of size k drawn from the sizes that occur (largest included)."""
    agg: dict[int, int] = {}
    for s, c in zip(sizes, counts, strict=True):
        agg[s] = agg.get(s, 0) + c
    xs = sorted(s for s in agg if agg[s] > 0)
    k = min(k, len(xs))
    return min(
        sum(agg[x] * (min(b for b in (*comb, xs[-1]) if b >= x) - x) for x in xs)
        for comb in itertools.combinations(xs[:-1], k - 1)
    )


def waste_of(plan: BucketPlan, sizes: list[int], counts: list[int]) -> int:
    return sum(
        c * (min(b for b in plan.buckets if b >= s) - s) for s, c in zip(sizes, counts, strict=True) if c
    )


@pytest.mark.parametrize("seed", range(6))
def test_exact_against_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(250):
        n = rng.randint(1, 9)
        sizes = [rng.randint(1, 80) for _ in range(n)]
        counts = [rng.randint(0, 6) for _ in range(n)]
        if not any(counts):
            counts[0] = 1
        for k, plan in enumerate(min_waste_table(sizes, counts, 6), 1):
            assert plan.waste == brute(sizes, counts, k), (sizes, counts, k)
            assert waste_of(plan, sizes, counts) == plan.waste  # the buckets really give that waste
            assert plan.k == k and list(plan.buckets) == sorted(set(plan.buckets))
            assert plan.buckets[-1] == max(s for s, c in zip(sizes, counts, strict=True) if c)


def test_the_example_from_the_issue() -> None:
    # 37 distinct sequence lengths, each seen 4 times, that fall just under multiples of 128
    sizes = sorted({128 * (1 + i % 4) - (i // 4) * 3 for i in range(37)})
    assert len(sizes) == 37
    plan = plan_buckets(sizes, [4] * 37, k=4)
    assert plan.buckets == (128, 256, 384, 512)
    assert plan.waste == brute(sizes, [4] * 37, 4)
    assert plan.describe().startswith("37 compiles -> 4 buckets [128, 256, 384, 512], +")
    assert plan.waste_share == pytest.approx(plan.waste / sum(4 * s for s in sizes))


def test_more_buckets_never_waste_more_and_n_buckets_waste_nothing() -> None:
    rng = random.Random(7)
    sizes = rng.sample(range(1, 5000), 60)
    counts = [rng.randint(1, 50) for _ in sizes]
    table = min_waste_table(sizes, counts, 60)
    wastes = [p.waste for p in table]
    assert wastes == sorted(wastes, reverse=True) and wastes[-1] == 0 and len(table) == 60


def test_choose_plan_rules() -> None:
    sizes, counts = [10, 11, 12, 100], [1, 1, 1, 1]
    total = sum(sizes)
    p = choose_plan(sizes, counts, max_waste_share=0.10)
    # k=1 wastes 90+89+88 (way over 10%); k=2 [12, 100] wastes 2+1 = 3 <= 13.3
    assert p.buckets == (12, 100) and p.waste == 3 and p.waste / total <= 0.10
    # explicit costs: a compile costs 100 elements of padding -> two buckets win (3 + 200 < 267 + 100)
    assert choose_plan(sizes, counts, compile_cost=100, element_cost=1).k == 2
    # compiles are cheap -> every size its own bucket
    assert choose_plan(sizes, counts, compile_cost=0.01, element_cost=1).waste == 0


def test_edge_cases() -> None:
    p = plan_buckets([64], k=4)
    assert p.buckets == (64,) and p.waste == 0 and p.compiles_before == 1
    assert plan_buckets([5, 5, 5], k=2).buckets == (5,)
    # a size that never ran costs no padding and gets no bucket, but it was still compiled once
    p = plan_buckets([8, 16, 32], [3, 0, 1], k=1)
    assert p.buckets == (32,) and p.waste == 3 * 24 and p.compiles_before == 3
    with pytest.raises(ValueError):
        plan_buckets([], k=2)
    with pytest.raises(ValueError):
        plan_buckets([1, 2], [1, -1])


def test_fast_on_thousands_of_distinct_sizes() -> None:
    rng = random.Random(1)
    sizes = list(range(1, 5001))
    counts = [rng.randint(1, 1000) for _ in sizes]
    t = time.perf_counter()
    table = min_waste_table(sizes, counts, 16)
    took = time.perf_counter() - t
    assert took < 2.0, took
    assert len(table) == 16 and table[-1].waste < table[0].waste
    # spot-check optimality on a prefix small enough for the quadratic DP below
    sub, sub_c = sizes[:300], counts[:300]
    assert min_waste_table(sub, sub_c, 5)[-1].waste == _quadratic_dp(sub, sub_c, 5)


def _quadratic_dp(sizes: list[int], counts: list[int], k: int) -> int:
    """Textbook O(k n^2) DP, independent of the planner's convex-hull speed-up."""
    n = len(sizes)
    cost = [[0] * (n + 1) for _ in range(n + 1)]
    for i in range(n):
        acc = 0
        for j in range(i + 1, n + 1):
            # group sizes[i:j] padded to sizes[j-1]
            acc = (
                sum(counts[t] * (sizes[j - 1] - sizes[t]) for t in range(i, j))
                if j - i < 3
                else acc + sum(counts[i : j - 1]) * (sizes[j - 1] - sizes[j - 2])
            )
            cost[i][j] = acc
    inf = float("inf")
    dp = [0.0] + [inf] * n
    for _ in range(k):
        dp = [0.0] + [min(dp[i] + cost[i][j] for i in range(j)) for j in range(1, n + 1)]
    return int(dp[n])


def test_plan_shapes_covers_every_varying_dimension_and_a_last_batch() -> None:
    from neuron_prof.analysis.compile.buckets import plan_shapes

    # batches of 16 padded to their longest sentence, then a last batch of 4
    sp = plan_shapes({(16, 36): 1, (16, 39): 2, (16, 40): 2, (16, 38): 1, (4, 35): 1})
    assert sp is not None
    dims = {i: (list(p.buckets), last) for i, p, last in sp.dims}
    assert dims == {0: ([16], True), 1: ([40], False)}
    assert sp.shapes_before == 5 and sp.shapes_after == 1 and sp.pad((4, 35)) == (16, 40)
    # two batch sizes that both recur are two buckets, not a last batch
    sp = plan_shapes({(8, 10): 5, (32, 10): 5})
    assert sp is not None and [(list(p.buckets), last) for _, p, last in sp.dims] == [([8, 32], False)]
    assert plan_shapes({(8, 10): 3}) is None
