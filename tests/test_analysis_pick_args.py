"""`Context.pick_args`: a column of args documents read for a few keys in one decode gives exactly what reading
each document whole gives (`Context.args`), absent keys told apart from nulls."""

from __future__ import annotations

import numpy as np

from neuron_prof.analysis import Context
from neuron_prof.analysis._context import ABSENT
from neuron_prof.model import TraceBuilder

DOCS = [
    {"Call stack": "a.py(1): f;b.py(2): g", "Input Dims": [[1, 2]], "External id": 7},
    {"call_site": "train.py:12", "stack": ["train.py:12 step"], "module": None},
    {},
    {"call_site": {"nested": [1, 2]}, "x": 1.5e300, "y": -0.0, "z": "é\u2028\\\"q"},
    {"Call stack": None, "call_site": ""},
]
KEYS = ("call_site", "module", "stack", "Call stack", "site_unknown")


def _ctx() -> tuple[Context, np.ndarray]:
    b = TraceBuilder()
    b.process(1, name="p")
    track = b.thread_track(1, 1, "t")
    for i, d in enumerate(DOCS):
        b.add_slice(track, 1_000 * i, 10, f"op{i}", "cpu_op", d or None)
    trace = b.build()
    return Context(trace), trace.slices.args


def test_pick_args_gives_each_documents_values_and_tells_absent_from_null() -> None:
    ctx, idx = _ctx()
    # GIVEN the rows in another order, one twice, and a row without args (-1)
    order = np.array([3, 0, 4, 1, 0, 2], dtype=np.int64)
    picked = ctx.pick_args(idx[order], KEYS)
    # THEN each tuple is the document read whole, key by key
    for got, i in zip(picked, order.tolist(), strict=True):
        whole = ctx.args(int(idx[i]))
        assert got == tuple(whole.get(k, ABSENT) for k in KEYS)
    assert idx[2] == -1 and picked[-1] == (ABSENT,) * len(KEYS)
    # a key present with null is None, a missing one is ABSENT
    assert picked[2][KEYS.index("Call stack")] is None and picked[2][KEYS.index("module")] is ABSENT
    assert picked[3][KEYS.index("module")] is None
    assert ctx.pick_args(np.zeros(0, dtype=np.int64), KEYS) == []


def test_pick_columns_gives_one_list_per_key() -> None:
    ctx, idx = _ctx()
    for order in ([3, 0, 4, 1, 0], [2, 1, 2]):  # every row with args; rows without args (-1) among them
        cols = ctx.pick_columns(idx[np.array(order)], KEYS)
        assert len(cols) == len(KEYS)
        for k, col in zip(KEYS, cols, strict=True):
            assert col == [ctx.args(int(idx[i])).get(k, ABSENT) for i in order]
    assert ctx.pick_columns(np.zeros(0, dtype=np.int64), KEYS) == ([],) * len(KEYS)
