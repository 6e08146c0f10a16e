"""`Context.pick_args`: a column of args documents read for a few keys in one decode gives exactly what reading
each document whole gives (`Context.args`), absent keys told apart from nulls."""

from __future__ import annotations

import numpy as np

from neuron_prof.analysis import Context
from neuron_prof.analysis.context import ABSENT
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


def test_documents_are_read_from_the_blobs_runs() -> None:
    """`ArgsStore.json_runs`: documents that lie back to back in the blob go as one slice, runs apart one
    newline apart; msgspec's decode_lines reads them one value per document (what pick_columns takes when it
    can); documents that are not objects end to end give no runs (the JSON array path reads them)."""
    import msgspec

    from neuron_prof.model import ArgsBuilder

    b = ArgsBuilder()
    for raw in (b'{"a":1}', b'{"a":{"b":[2]}}', b'{"a":"}{"}'):
        b.add_raw(raw)
    st = b.build()
    assert st.json_runs(np.array([0, 1, 2])) == b'{"a":1}{"a":{"b":[2]}}{"a":"}{"}'
    assert st.json_runs(np.array([2, 0, 1])) == b'{"a":"}{"}\n{"a":1}{"a":{"b":[2]}}'
    assert msgspec.json.Decoder(dict).decode_lines(st.json_runs(np.array([2, 0, 1, 1]))) == [
        {"a": "}{"}, {"a": 1}, {"a": {"b": [2]}}, {"a": {"b": [2]}}]
    for odd in (b' {"a":1}', b'{"a":1} ', b"[1]", b"1", b""):
        b2 = ArgsBuilder()
        b2.add_raw(b'{"a":0}')
        b2.add_raw(odd)
        assert b2.build().json_runs(np.array([0, 1])) is None


def test_pick_columns_reads_documents_that_are_not_objects_end_to_end() -> None:
    """Stored as a loader may keep them (space around the object): read through the JSON array, same values."""
    b = TraceBuilder()
    b.process(1, name="p")
    track = b.thread_track(1, 1, "t")
    name, cat = b.strings.intern("op"), b.strings.intern("cpu_op")
    for i, raw in enumerate((b' {"call_site": "a.py:1", "module": null}', b'{"stack": ["x"]}\n', b'{"module": "m"}')):
        b.add_slice_ids(track, 1_000 * i, 10, name, cat, b.args.add_raw(raw))
    trace = b.build()
    ctx, idx = Context(trace), trace.slices.args
    assert trace.args.json_runs(idx) is None
    for k, col in zip(KEYS, ctx.pick_columns(idx, KEYS), strict=True):
        assert col == [ctx.args(int(i)).get(k, ABSENT) for i in idx.tolist()]


def test_raw_columns_are_each_values_json_text() -> None:
    """`pick_columns(raw=True)`: the JSON text of each value (decoding it gives the value), ABSENT kept."""
    import msgspec

    ctx, idx = _ctx()
    order = idx[np.array([3, 0, 4, 1, 0, 2])]
    for col, raw in zip(ctx.pick_columns(order, KEYS), ctx.pick_columns(order, KEYS, raw=True), strict=True):
        assert all(isinstance(r, bytes) or r is ABSENT for r in raw)
        assert [r if r is ABSENT else msgspec.json.decode(r) for r in raw] == col
