"""Odd Chrome JSON events and args, as real files hold them, and the strict comparison of two loads, shared by
the tests of the loader's fast paths (tests/test_json_typed.py, test_json_scan.py, test_json_fill.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tests._builders import assert_same


def ev(**kw: object) -> dict[str, object]:
    return {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 10.5, "dur": 1.25, **kw}


ODD_ARGS: list[object] = [
    {"External id": 3, "Input Dims": [[4, 8], []], "Call stack": "a.py(1): f; b.py(2): g"},
    {"blocks per SM": 1.32, "x": 1.50, "y": 2e3, "z": -0, "w": -0.0, "big": 12345678901234567890},
    {"s": "tab\there \"quoted\" \\ back", "u": "µs \u00e9", "t": "a , b : c"},
    {}, None, 0, "", [], False,
    {"nested": {"a": [1, {"b": None}]}, "e": 1e-07, "f": 5160494368000.000},
]


def assert_identical(a: Any, b: Any) -> None:
    """Not only the same events: the same ids, string table and bytes everywhere."""
    assert_same(a, b)
    assert a.strings.as_list() == b.strings.as_list()
    for tab in ("slices", "instants", "counters", "flows"):
        x, y = getattr(a, tab), getattr(b, tab)
        for f in x.__dataclass_fields__:
            assert np.array_equal(getattr(x, f), getattr(y, f)), (tab, f)
    assert [a.args.raw(i) for i in range(len(a.args))] == [b.args.raw(i) for i in range(len(b.args))]
    assert a.metadata == b.metadata
