"""Merging ranks: clock offsets recovered from collectives, stragglers named with their cause."""

from __future__ import annotations

import pytest

from neuron_prof.analysis.collectives.stragglers import straggler_findings
from neuron_prof.cli import main
from neuron_prof.cli._merge import parse_rank_durations
from neuron_prof.errors import UsageError
from neuron_prof.merge import merge_traces
from neuron_prof.model import Meta, TraceBuilder, TrackKind
from tests._merge_ranks import SKEW
from tests._merge_ranks import rank_with as _rank


def test_offset_recovered_and_straggler_named() -> None:
    merged, al = merge_traces([_rank(0), _rank(1, skew=SKEW, late_compile=True, jitter=20_000)])
    off = al.offsets[1]
    # GIVEN exits agree to ±20 µs WHEN aligned THEN the 5 s skew is undone to within that jitter
    assert off.method == "collectives" and off.matched == 6
    assert abs(off.offset_ns + SKEW) <= 40_000
    assert off.uncertainty_ns is not None and off.uncertainty_ns <= 40_000
    assert [p.rank for p in merged.processes] == [0, 1]
    assert all(p.name.startswith(f"rank {p.rank}:") for p in merged.processes)
    # cross-rank flows link the same collective on both ranks
    cross = merged.flows.flow_id >= (0x7FFF << 48)
    assert cross.sum() == 6
    [f] = straggler_findings(merged)
    assert f.kind == "straggler" and f.rank == 1 and f.count == 6
    assert f.call_site == "train.py:42" and "compile stall" in f.title
    # rank 0 waits ~7 ms per collective
    assert abs(f.evidence["wait_ns_by_rank"]["0"] - 6 * 7_000_000) < 6 * 100_000


def test_wall_and_steps_move_with_the_clock() -> None:
    # GIVEN rank 1's steps recorded on its own clock, 5 s ahead, and rank 0 without steps
    r1 = _rank(1, skew=SKEW)
    steps = [[k, 1_950_000_000 + k * 50_000_000 + SKEW, 1_990_000_000 + k * 50_000_000 + SKEW] for k in range(6)]
    r1 = r1.replace(metadata={**r1.metadata, Meta.STEPS: steps})
    merged, al = merge_traces([_rank(0), r1])
    off = al.offsets[1].offset_ns
    # THEN the merged steps and wall range are on rank 0's clock
    assert merged.metadata[Meta.STEPS] == [[k, a + off, b + off] for k, a, b in steps]
    assert abs(merged.metadata[Meta.STEPS][0][1] - 1_950_000_000) < 40_000
    assert merged.metadata[Meta.WALL] == [1_900_000_000 + min(0, SKEW + off), 2_400_000_000 + max(0, SKEW + off)]


def test_user_offset_wins_and_duplicate_ranks_refused() -> None:
    _, al = merge_traces([_rank(0), _rank(1, skew=SKEW)], offsets_ns={1: -123})
    assert al.offsets[1].offset_ns == -123 and al.offsets[1].method == "user"
    with pytest.raises(UsageError, match="same rank"):
        merge_traces([_rank(0), _rank(0)])


def test_disagreeing_collectives_keep_recorded_clock() -> None:
    a = _rank(0, n=4)
    b = TraceBuilder()
    p = b.process(7, rank=1)
    coll = b.track(p, "collectives", TrackKind.COLLECTIVE)
    for k, gap in enumerate([3_000_000, 90_000_000, 11_000_000, 170_000_000]):
        b.add_slice(coll, 2_000_000_000 + k * gap, 1_000_000, "all_reduce", args={"group": "0"})
    b.metadata[Meta.RANK] = 1
    _, al = merge_traces([a, b.build()])
    assert al.offsets[1].method == "recorded" and al.offsets[1].offset_ns == 0
    assert "disagree" in al.offsets[1].note


def test_parse_rank_durations() -> None:
    assert parse_rank_durations(("1=5s", "2=-250ms", "3=12us", "0=7"), "--skew") == {
        1: 5_000_000_000, 2: -250_000_000, 3: 12_000, 0: 7}
    with pytest.raises(UsageError):
        parse_rank_durations(("x=1s",), "--skew")


def test_merge_cli_on_real_sampled_ranks(tmp_path, capsys) -> None:
    from tests.conftest import KINETO_DIR

    r0, r1 = KINETO_DIR / "trace_filter_sampled_rank-0.json.gz", KINETO_DIR / "trace_filter_sampled_rank-1.json.gz"
    if not r0.exists():
        pytest.skip("../shared/traces absent")
    from neuron_prof import load

    out = tmp_path / "merged.json"
    assert main(["merge", str(r0), str(r1), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "rank 0:" in text and "rank 1:" in text
    merged = load(out)
    a, b = load(r0), load(r1)
    assert len(merged.slices) == len(a.slices) + len(b.slices)
    assert sorted({p.rank for p in merged.processes}) == [0, 1]
