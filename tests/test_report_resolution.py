"""The HTML report's plots stay small on a big trace: the collectives' plot holds at most MAX_POINTS points,
shared by the ops, and a bucket's slowest and fastest collective survive the cut."""

from __future__ import annotations

import numpy as np

from neuron_prof.exporters._report_data import Collectives
from neuron_prof.exporters._report_figures import MAX_POINTS, collective_bandwidth


def test_collective_plot_keeps_outliers_within_its_resolution() -> None:
    n = 20_000
    rng = np.random.default_rng(0)
    ops = ["allreduce"] * n + ["broadcast"] * 3
    gbps = np.r_[rng.uniform(90, 110, n), [50.0, 60.0, 70.0]]
    slow, fast = 12_345, 777
    gbps[slow], gbps[fast] = 0.5, 900.0
    start = np.r_[np.arange(n, dtype=np.float64), [1.0, 2.0, 3.0]]
    m = len(ops)
    c = Collectives(source="NCCL/RCCL kernel", op=ops, rank=np.zeros(m, np.int64), start_ms=start,
                    dur_ms=np.ones(m), nbytes=gbps * 1e6, gbps=gbps)
    fig = collective_bandwidth(c)
    assert fig is not None
    by_op = {d["name"]: d for d in fig["data"]}
    assert sum(len(d["x"]) for d in fig["data"]) <= MAX_POINTS
    assert by_op["broadcast"]["y"] == [50.0, 60.0, 70.0]  # a small op is never thinned
    a = by_op["allreduce"]
    assert float(slow) in a["x"] and float(fast) in a["x"]
    assert min(a["y"]) == 0.5 and max(a["y"]) == 900.0
