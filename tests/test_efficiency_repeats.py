"""`row_work` counts each distinct call (op, shapes, dtypes, concrete inputs) once, however many rows repeat it:
the per-row FLOPs and bytes are those `op_work` gives each row read whole, with the memo bounded or not."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from neuron_prof.analysis import Context
from neuron_prof.analysis.efficiency import work
from neuron_prof.analysis.efficiency.counts import op_work
from neuron_prof.model import TraceBuilder, windows

SHAPES: list[tuple[str, dict[str, Any]]] = [
    ("aten::mm", {"Input Dims": [[8, 16], [16, 4]], "Input type": ["float", "float"]}),
    ("aten::mm", {"Input Dims": [[8, 16], [16, 32]], "Input type": ["c10::BFloat16", "c10::BFloat16"]}),
    ("aten::add", {"Input Dims": [[8, 4], [8, 4], []], "Input type": ["float", "float", "Scalar"],
                   "Concrete Inputs": ["", "", "1"]}),
    ("aten::conv2d", {"Input Dims": [[2, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], []],
                      "Input type": ["float", "float", "float", "", "", "", "Int"],
                      "Concrete Inputs": ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"]}),
    ("aten::conv2d", {"Input Dims": [[2, 3, 8, 8], [4, 3, 3, 3], [4], [], [], [], []],  # the same shapes,
                      "Input type": ["float", "float", "float", "", "", "", "Int"],  # another stride
                      "Concrete Inputs": ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"]}),
    ("aten::mm", {"Input type": ["float", "float"]}),  # no shapes recorded: not counted
]

LINEAR = {"Input Dims": [[8, 16], [4, 16], [4]], "Input type": ["float", "float", "float"]}
ADDMM = {"Input Dims": [[4], [8, 16], [16, 4]], "Input type": ["float", "float", "float"],
         "Concrete Inputs": ["", "", "", "1", "1"]}


def _trace(repeats: int) -> tuple[Context, list[tuple[str, dict[str, Any]]]]:
    b = TraceBuilder()
    b.process(1, name="p")
    track = b.thread_track(1, 1, "t")
    calls = []
    for r in range(repeats):  # each row's document differs (its ids), its shapes repeat
        for k, (name, args) in enumerate(SHAPES):
            doc = {"External id": r * 10 + k, "Record function id": r, **args}
            b.add_slice(track, 1_000 * (r * len(SHAPES) + k), 10, name, "cpu_op", doc)
            calls.append((name, doc))
        ts = 1_000 * (r * len(SHAPES) + len(SHAPES) - 1) + 100  # a linear holding its addmm: one call counted
        for name, at, dur, args in (("aten::linear", ts, 200, LINEAR), ("aten::addmm", ts + 10, 50, ADDMM)):
            doc = {"External id": r, **args}
            b.add_slice(track, at, dur, name, "cpu_op", doc)
            calls.append((name, doc))
    return Context(b.build()), calls


@pytest.mark.parametrize(("held", "window"), [(work.COUNTS_HELD, 1 << 20), (1, 1 << 20), (3, 1 << 20),
                                              (work.COUNTS_HELD, 7)])
def test_each_distinct_call_is_counted_once_and_every_row_gets_its_count(
        monkeypatch: pytest.MonkeyPatch, held: int, window: int) -> None:
    monkeypatch.setattr(windows, "ROW_WINDOW", window)  # 7: the rows read in many windows
    ctx, calls = _trace(repeats=50)
    counted: list[str] = []

    def spy(name: str, *a: Any) -> Any:
        counted.append(name)
        return op_work(name, *a)

    monkeypatch.setattr(work, "op_work", spy)
    monkeypatch.setattr(work, "COUNTS_HELD", held)
    w = work.row_work(ctx)
    # THEN every counted row has the FLOPs and bytes of its own call read whole
    want = [op_work(n, d.get("Input Dims"), d.get("Input type"), d.get("Concrete Inputs")) for n, d in calls]
    rows = [i for i, x in enumerate(want) if x is not None]
    assert w.rows.tolist() == rows and len(rows) == 7 * 50
    assert w.flops.tolist() == [want[i][0] for i in rows]  # type: ignore[index]
    assert w.bytes.tolist() == [want[i][1] for i in rows]  # type: ignore[index]
    assert [w.precisions[p] for p in w.precision.tolist()] == [want[i][2] for i in rows]  # type: ignore[index]
    assert np.all(w.flops > 0)
    # AND the addmm a linear holds is no outer call (the trace's FLOPs count the multiply once)
    assert [calls[i][0] for i, o in zip(rows, w.outer.tolist(), strict=True) if not o] == ["aten::addmm"] * 50
    # AND a distinct call with shapes is counted once while the memo holds it (a memo of 1 or 3 recounts the
    # calls on each change; a call without shapes is never counted)
    assert len(counted) == (7 if held >= 7 else len(rows))
