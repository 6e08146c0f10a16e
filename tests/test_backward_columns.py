"""Backward attribution on a generated training trace written as torch.profiler writes autograd's work (issue 35
item 1): each node's evaluate_function span with the node span inside, the fwdbwd flow ending on the node span,
AccumulateGrad without a sequence number. The flows and the sequence numbers find the same forward ops, in any
windows of rows and of the args blob, and a big cached trace's results lie in mapped files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.gen_trace import ACCUMULATE, EVALUATE, write
from neuron_prof.analysis import spill
from neuron_prof.analysis.context import Context
from neuron_prof.analysis.sites import backward
from neuron_prof.analysis.sites.backward import (
    NO_FORWARD,
    NOT_BACKWARD,
    UNKNOWN_FORWARD,
    Backward,
    backward_of,
    node_name,
)
from neuron_prof.analysis.sites.host import host_nesting
from neuron_prof.loaders import load
from neuron_prof.model import Trace, TraceBuilder, windows
from tests._column_folder import mapped_copy

N = 30_000
_NODE_OF = {"aten::addmm": "AddmmBackward0", "aten::mm": "MmBackward0", "aten::gelu": "GeluBackward0",
            "aten::native_layer_norm": "NativeLayerNormBackward0", "aten::_softmax": "SoftmaxBackward0",
            "aten::bmm": "BmmBackward0"}
"""The node each forward op makes, as autograd names it (torch/csrc/autograd/generated)."""
FIELDS = ("forward", "node", "forward_op", "root")


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Trace]:
    """The generated trace in memory, the same without its fwdbwd flows, with only one span of each node
    saying which forward op (its flow on the node span or on the evaluate_function span, the other's sequence
    number taken out), and from a column folder."""
    tmp = tmp_path_factory.mktemp("bwdcol")
    path = write(N, tmp / "t.json")
    events = json.loads(path.read_text())["traceEvents"]
    (tmp / "noflow.json").write_text(json.dumps({"traceEvents": [e for e in events if e.get("cat") != "fwdbwd"]}))
    moved = 0
    for i, e in enumerate(events):  # [evaluate_function, node span, flow end]
        if e.get("cat") == "fwdbwd" and e["ph"] == "f":
            assert events[i - 2]["name"].startswith(EVALUATE) and events[i - 1]["ts"] == e["ts"]
            if moved % 2:  # the flow ends on the evaluate_function span: only that one says which forward op
                e["ts"] = events[i - 2]["ts"]
            for k in ("Sequence number", "Fwd thread id"):  # else only the node span does
                del events[i - 2 + moved % 2]["args"][k]
            moved += 1
    assert moved > 500
    (tmp / "evalflow.json").write_text(json.dumps({"traceEvents": events}))
    held = load(path)
    return {"held": held, "noflow": load(tmp / "noflow.json"), "evalflow": load(tmp / "evalflow.json"),
            "mapped": mapped_copy(held, tmp / "cols")}


def _fields(b: Backward) -> dict[str, list[int]]:
    return {f: np.asarray(getattr(b, f)).tolist() for f in FIELDS}


def test_each_node_finds_the_forward_op_that_made_it(traces: dict[str, Trace]) -> None:
    tr = traces["held"]
    ctx = Context(tr)
    b, rows = backward_of(ctx), host_nesting(ctx).rows
    names = [tr.slice_name(int(r)) for r in rows]
    evals = [i for i, s in enumerate(names) if s.startswith(EVALUATE)]
    nodes = [i for i in evals if not names[i].endswith(ACCUMULATE)]
    assert len(nodes) > 500 and len(evals) > len(nodes)
    for i in evals:
        if names[i].endswith(ACCUMULATE):  # a leaf's accumulator: no forward op makes it
            assert b.forward[i] == NO_FORWARD and b.root[i] == i
            continue
        f = int(b.forward[i])
        assert f >= 0 and _NODE_OF[tr.slice_name(f)] == node_name(names[i])
        assert tr.slices.ts_ns[f] < tr.slices.ts_ns[rows[i]]
        assert tr.s(int(b.forward_op[i])) == tr.slice_name(f)  # the user's call: the op itself, nothing around it
    assert len({int(b.forward[i]) for i in nodes}) == len(nodes)  # one node per forward op
    # every slice: the spans around it, up its parents one at a time: the outermost evaluate_function and the
    # innermost backward span (an evaluate_function or a node span)
    parent = host_nesting(ctx).parent_pos.tolist()
    span = [s.startswith(EVALUATE) or s in _NODE_OF.values() for s in names]
    for i in range(len(rows)):
        chain, p = [], i
        while p >= 0:
            chain.append(p)
            p = parent[p]
        mine = [p for p in chain if span[p]]
        if not mine:
            assert b.root[i] == -1 and b.forward[i] == NOT_BACKWARD and b.node[i] == 0 and b.forward_op[i] == 0
            continue
        assert b.root[i] == mine[-1] and names[mine[-1]].startswith(EVALUATE)
        assert tr.s(int(b.node[i])) == names[mine[0]] and b.forward[i] == b.forward[mine[-1]]
    assert (b.root >= 0).sum() > 3 * len(evals)  # the node spans, the backward ops and their launches


def test_sequence_numbers_and_flows_on_either_span_find_the_same(traces: dict[str, Trace]) -> None:
    held, noflow, evalflow = traces["held"], traces["noflow"], traces["evalflow"]
    assert len(held.flows) > len(noflow.flows)
    want = _fields(backward_of(Context(held)))
    assert _fields(backward_of(Context(noflow))) == want
    assert _fields(backward_of(Context(evalflow))) == want


def test_the_sequence_number_names_the_last_forward_op_started_by_the_span(tmp_path: Path) -> None:
    """Rule 2 of `backward`: of the forward ops (Fwd thread id 0) with the span's number in its process and not
    inside a backward span, the one started last by the span's start (the later one of two that start together)."""
    b = TraceBuilder()
    main, other = b.thread_track(1, 1), b.thread_track(1, 2)
    away = b.thread_track(2, 1)
    fwd = {"Sequence number": 5, "Fwd thread id": 0}
    bwd = {"Sequence number": 5, "Fwd thread id": 1}
    b.add_slice(main, 50, 10, "aten::mm", "cpu_op", fwd)
    tie = [b.add_slice(main, 100, 1, "aten::mm", "cpu_op", fwd) for _ in range(2)]  # start with the span
    b.add_slice(main, 101, 1, "aten::mm", "cpu_op", fwd)  # after it
    b.add_slice(main, 100, 1, "aten::mm", "cpu_op", {"Sequence number": 5, "Fwd thread id": 3})  # a backward op
    mul = b.add_slice(main, 60, 5, "aten::mul", "cpu_op", {"Sequence number": 6, "Fwd thread id": 0})
    span = b.add_slice(other, 100, 50, EVALUATE + "MmBackward0", "cpu_op", bwd)
    b.add_slice(other, 100, 40, "MmBackward0", "cpu_op", bwd)
    b.add_slice(other, 100, 5, "aten::mm", "cpu_op", fwd)  # inside the backward: no forward op
    nested = b.add_slice(other, 110, 10, EVALUATE + "MulBackward0", "cpu_op", {"Sequence number": 6, "Fwd thread id": 1})
    deepest = b.add_slice(other, 111, 8, "MulBackward0", "cpu_op", {"Sequence number": 6, "Fwd thread id": 1})
    b.add_slice(away, 100, 1, "aten::mm", "cpu_op", fwd)  # another process
    acc = b.add_slice(other, 200, 5, EVALUATE + ACCUMULATE, "cpu_op", {})
    lost = b.add_slice(other, 300, 5, EVALUATE + "MmBackward0", "cpu_op", {"Sequence number": 9, "Fwd thread id": 1})
    tr = b.build()
    ctx = Context(tr)
    bw, rows = backward_of(ctx), host_nesting(ctx).rows.tolist()
    assert bw.forward[rows.index(span)] == tie[1]
    assert bw.forward[rows.index(nested)] == bw.forward[rows.index(deepest)] == mul  # a backward inside a backward
    assert bw.root[rows.index(deepest)] == bw.root[rows.index(nested)] == rows.index(span)
    assert bw.forward[rows.index(acc)] == NO_FORWARD and bw.forward[rows.index(lost)] == UNKNOWN_FORWARD


@pytest.mark.parametrize("rows, blob", [(7, 4096), (1000, 1 << 16)])
def test_small_windows_give_what_one_window_gives(traces: dict[str, Trace], rows: int, blob: int,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    whole = {k: _fields(backward_of(Context(traces[k]))) for k in ("held", "noflow", "evalflow")}
    monkeypatch.setattr(windows, "ROW_WINDOW", rows)
    monkeypatch.setattr(backward, "SCAN_WINDOW", blob)
    for k, want in whole.items():
        assert _fields(backward_of(Context(traces[k]))) == want


def test_a_big_cached_traces_results_lie_in_mapped_files(traces: dict[str, Trace],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spill, "SPILL_ROWS", 0)
    monkeypatch.setattr(spill, "SPILL_BYTES", 0)
    b = backward_of(Context(traces["mapped"]))
    for f in FIELDS:
        a = getattr(b, f)
        assert spill._mapped(a) and not a.flags.writeable
    assert _fields(b) == _fields(backward_of(Context(traces["held"])))


def test_generated_event_count_is_exact(tmp_path: Path) -> None:
    for n in (1, 14, 3_001):
        assert len(json.loads(write(n, tmp_path / "n.json").read_text())["traceEvents"]) == n
