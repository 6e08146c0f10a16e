"""Ranks that take turns arriving last are jitter, not a straggler (issue 34): a 2-rank DDP job on a loaded machine
was told each rank was a straggler "at" its `.item()` line and its all-reduce's spread was a warning; a rank late
at every collective stays one."""

from __future__ import annotations

import numpy as np

from neuron_prof.analysis import LateArrivals
from neuron_prof.analysis.collectives.stragglers import chance_of_last, straggler_findings
from neuron_prof.job._findings import collective_spread
from neuron_prof.merge import merge_traces
from neuron_prof.model import KinetoCat, Meta, Trace, TraceBuilder, TrackKind

MS = 1_000_000
T0 = 1_700_000_000_000_000_000
STEPS = 12


def _rank(rank: int, late_at: set[int]) -> Trace:
    """A rank whose host works 12 ms, then 8 ms more (a `.item()` line) at the steps in `late_at`, before each
    all-reduce; every rank leaves each all-reduce together."""
    b = TraceBuilder()
    pid = 1000 + rank
    p = b.process(pid, name="python", rank=rank)
    main_t = b.thread_track(pid, 1, "main")
    coll = b.track(p, "collectives", TrackKind.COLLECTIVE)
    rows = []
    for k in range(STEPS):
        s = T0 + k * 40 * MS
        late = 8 if k in late_at else 0
        b.add_slice(main_t, s, (12 + late) * MS, "aten::mm", KinetoCat.CPU_OP, {"call_site": "train.py:38"})
        b.add_slice(coll, s + (13 + late) * MS, (19 - late) * MS, "all_reduce",
                    args={"group": "0", "bytes_in": 4096, "bytes_out": 4096})
        rows.append([k, s, s + 40 * MS])
    b.metadata.update({Meta.RANK: rank, Meta.WORLD_SIZE: 2, Meta.STEPS: rows, Meta.WALL: [T0, T0 + STEPS * 40 * MS]})
    return b.build()


def _severities(late0: set[int], late1: set[int]) -> dict[int, str]:
    found = straggler_findings(merge_traces([_rank(0, late0), _rank(1, late1)])[0])
    return {int(f.rank or 0): f.severity for f in found}


def test_ranks_taking_turns_are_not_stragglers() -> None:
    even = {k for k in range(STEPS) if k % 2 == 0}
    sev = _severities(even, set(range(STEPS)) - even)
    assert sev == {0: "info", 1: "info"}, sev


def test_a_rank_late_at_every_collective_is_a_straggler() -> None:
    assert _severities(set(), set(range(STEPS))) == {1: "warning"}


def test_jitter_names_no_line_and_a_straggler_its_line() -> None:
    """Ranks taking turns have no line to fix: the finding names none (what the rank did stays in its
    evidence); a rank late at every collective is at the line that made it late. (ddp_slow_rank.py on the CPU:
    rank 0, last once by 1.9 ms, was a straggler "at" the model's call.)"""
    even = {k for k in range(STEPS) if k % 2 == 0}
    turns = straggler_findings(merge_traces([_rank(0, even), _rank(1, set(range(STEPS)) - even)])[0])
    assert turns and all(f.call_site == "" and f.evidence["cause"]["call_site"] == "train.py:38" for f in turns)
    (one,) = straggler_findings(merge_traces([_rank(0, set()), _rank(1, set(range(STEPS)))])[0])
    assert one.call_site == "train.py:38"


def _late(last: list[int]) -> LateArrivals:
    """Matched all-reduces of 2 ranks; at call k the rank last[k] arrives 5 ms after the other."""
    start = np.zeros((len(last), 2), dtype=np.int64)
    for k, r in enumerate(last):
        start[k] = [T0 + k * 40 * MS] * 2
        start[k, r] += 5 * MS
    return LateArrivals(ranks=[0, 1], keys=["0/allreduce"] * len(last), start=start, end=start.max(axis=1,
                        keepdims=True).repeat(2, axis=1) + MS)


def test_collective_spread_by_turns_is_info_and_by_one_rank_a_warning() -> None:
    wall = STEPS * 40 * MS
    (turns,) = collective_spread(_late([k % 2 for k in range(STEPS)]), wall)
    (one,) = collective_spread(_late([1] * STEPS), wall)
    assert turns.severity == "info" and not turns.evidence["systematic"]
    assert one.severity == "warning" and one.evidence["systematic"] and one.rank == 1


def test_chance_of_last() -> None:
    assert chance_of_last(12, 12, 2) == 0.5**12
    assert chance_of_last(0, 12, 2) == 1.0
    assert abs(chance_of_last(5, 6, 2) - 7 / 64) < 1e-12
