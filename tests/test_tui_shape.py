"""TUI layer 1: the views' table builders (beside their screens), on the demo-like trace (tests/_demo_trace.py)."""

from __future__ import annotations

import numpy as np

from neuron_prof.analysis import Context
from neuron_prof.model import TrackKind
from neuron_prof.tui._lanes import build_lanes
from neuron_prof.tui.screens._compile_table import compile_table
from neuron_prof.tui.screens.collectives import collective_table
from neuron_prof.tui.screens.fallback import fallback_table
from neuron_prof.tui.screens.ops import OPS, calls_table
from tests._demo_trace import (
    COMPILE_MS,
    COMPILE_OP,
    FALLBACK_OP,
    FALLBACK_SITE,
    MS,
    N_STEPS,
    STEP_MS,
    demo_like_trace,
)


def test_compile_table_groups_by_op_then_signature_and_ranks_by_cost() -> None:
    tab = compile_table(demo_like_trace())
    ops = np.flatnonzero(tab["parent"] < 0)
    assert list(tab["name"][ops]) == [COMPILE_OP, "forward_graph"]
    assert tab["total_ns"][ops[0]] == COMPILE_MS * MS
    # forward_graph compiled twice with two signatures: one op row of 60 ms over two signature rows of
    # 30 ms, each with its own reason
    fg = int(ops[1])
    sigs = np.flatnonzero(tab["parent"] == fg)
    assert tab["total_ns"][fg] == 60 * MS and tab["count"][fg] == 2 and tab["n_sigs"][fg] == 2
    assert len(sigs) == 2 and set(tab["total_ns"][sigs]) == {30 * MS}
    assert sorted(tab["label"][sigs]) == ["seq=192", "seq=384"]
    assert "expected 64, actual 192" in tab["reasons"][sigs[0]] + tab["reasons"][sigs[1]]
    assert all(tab["where"][r] == "train.py:50" for r in (fg, *sigs))


def test_fallback_table_by_call_site() -> None:
    tab = fallback_table(demo_like_trace())
    assert list(tab["call_site"]) == [FALLBACK_SITE, "data.py:12"]
    assert list(tab["count"]) == [N_STEPS, N_STEPS // 2]
    assert tab["total_ns"][0] == N_STEPS * 3 * MS
    assert tab["copy_bytes"][0] == N_STEPS * 4096
    wall = N_STEPS * STEP_MS * MS + COMPILE_MS * MS
    assert abs(tab["share"][0] - N_STEPS * 3 * MS / wall) < 1e-12


def test_op_table_self_time() -> None:
    trace = demo_like_trace()
    from neuron_prof.tui._data import prepare

    data = prepare([trace])
    ops = OPS.of(data)
    i = int(np.flatnonzero(ops["name"] == "aten::linear")[0])
    # aten::linear lasts 4 ms with a 2 ms aten::addmm inside: self 2 ms per call
    assert ops["total_ns"][i] == N_STEPS * 4 * MS
    assert ops["self_ns"][i] == N_STEPS * 2 * MS
    assert ops["count"][i] == N_STEPS


def test_op_table_collapses_step_numbers() -> None:
    trace = demo_like_trace()
    from neuron_prof.tui._data import prepare

    data = prepare([trace])
    rank = data.rank
    ops = OPS.of(data)
    steps = np.flatnonzero(ops["name"] == "ProfilerStep#*")
    assert len(steps) == 1 and not any(
        str(n).startswith("ProfilerStep#") and n != "ProfilerStep#*" for n in ops["name"]
    )
    i = int(steps[0])
    assert ops["count"][i] == N_STEPS
    assert ops["total_ns"][i] == N_STEPS * STEP_MS * MS + COMPILE_MS * MS
    # drilling in lists every step
    calls = calls_table(trace, rank.op_accounting, int(ops["op"][i]))
    assert len(calls["row"]) == N_STEPS and calls["dur_ns"][0] == (STEP_MS + COMPILE_MS) * MS


def test_collective_table_bandwidth() -> None:
    tab = collective_table([Context(demo_like_trace(0)), Context(demo_like_trace(1))])
    assert sorted(tab["rank"]) == [0, 1]
    # 8 MB in 2 ms is 4 GB/s
    assert np.allclose(tab["gbps"], 8 * MS / (2 * MS))
    assert list(tab["count"]) == [N_STEPS, N_STEPS]


def test_lane_binning_is_exact() -> None:
    trace = demo_like_trace()
    from neuron_prof.tui._data import prepare

    rank = prepare([trace]).rank
    origin = trace.time_range()[0]
    lanes = build_lanes(trace, rank.depth, origin)
    fb = next(lane for lane in lanes if lane.kind == TrackKind.FALLBACK)
    # over the whole trace in one cell, the busy fill is the fallback time over the wall
    wall = trace.time_range()
    fill, _ = fb.bin(0, wall[1] - origin, 1)
    total = (N_STEPS * 3 + N_STEPS // 2) * MS
    assert abs(fill[0] - total / (wall[1] - wall[0])) < 1e-9
    # a cell inside the first fallback call is full and shows that call
    s0 = int(fb.starts[0])
    fill, rows = fb.bin(s0, s0 + MS, 4)
    assert np.allclose(fill, 1.0) and trace.slice_name(int(rows[0])) == FALLBACK_OP
