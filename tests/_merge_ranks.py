"""Ranks for the merge tests: n all_reduces that every rank leaves at the same true time, clocks skewed."""

from __future__ import annotations

import numpy as np

from neuron_prof.model import Meta, TraceBuilder, TrackKind

SKEW = 5_000_000_000  # rank 1's clock runs 5 s ahead


def rank_with(rank: int, skew: int = 0, late_compile: bool = False, jitter: int = 0, n: int = 6):
    """A rank with n all_reduces that all ranks leave at the same true time (plus jitter)."""
    b = TraceBuilder()
    pid = 1000 + rank
    p = b.process(pid, name="python", rank=rank)
    main_t = b.thread_track(pid, 1, "main")
    coll = b.track(p, "collectives", TrackKind.COLLECTIVE)
    comp = b.track(p, "compile", TrackKind.COMPILE)
    rng = np.random.default_rng(rank)
    for k in range(n):
        end = 2_000_000_000 + k * 50_000_000 + int(rng.integers(-jitter, jitter + 1))
        start = end - (8_000_000 if not late_compile else 1_000_000)
        if late_compile:
            b.add_slice(comp, start - 7_000_000 + skew, 6_900_000, "aten::addmm",
                        args={"call_site": "train.py:42", "module": "model.fc"})
        b.add_slice(main_t, start - 20_000_000 + skew, 19_000_000, "aten::mm", "cpu_op")
        b.add_slice(coll, start + skew, end - start, "all_reduce",
                    args={"group": "0", "bytes_in": 4096, "bytes_out": 4096})
    b.metadata[Meta.RANK] = rank
    b.metadata[Meta.WALL] = [1_900_000_000 + skew, 2_400_000_000 + skew]
    return b.build()
