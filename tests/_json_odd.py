"""Odd Chrome JSON events and args, as real files hold them, shared by the tests of the loader's fast paths
(tests/test_json_typed.py, tests/test_json_scan.py)."""

from __future__ import annotations


def ev(**kw: object) -> dict[str, object]:
    return {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": 10.5, "dur": 1.25, **kw}


ODD_ARGS: list[object] = [
    {"External id": 3, "Input Dims": [[4, 8], []], "Call stack": "a.py(1): f; b.py(2): g"},
    {"blocks per SM": 1.32, "x": 1.50, "y": 2e3, "z": -0, "w": -0.0, "big": 12345678901234567890},
    {"s": "tab\there \"quoted\" \\ back", "u": "µs \u00e9", "t": "a , b : c"},
    {}, None, 0, "", [], False,
    {"nested": {"a": [1, {"b": None}]}, "e": 1e-07, "f": 5160494368000.000},
]
