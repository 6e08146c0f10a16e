"""Op accounting rules (neuron_prof.analysis.op_table) on small traces built in code.

Real captures through every surface (summary, diff, report, TUI, drill-in) are in tests/test_ops_captures.py.
"""

from __future__ import annotations

import numpy as np
import pytest

from neuron_prof.analysis import op_key, op_table
from neuron_prof.model import KinetoCat, ProcessKind, Trace, TraceBuilder, TrackKind

CPU = KinetoCat.CPU_OP
PY = KinetoCat.PYTHON


def _one(trace: Trace, name: str, where: str = "host") -> tuple[int, int, int]:
    t = op_table(trace)
    i = t.find(name, where)
    assert i >= 0, f"{name} ({where}) missing from {list(t.name)}"
    return int(t.calls[i]), int(t.self_ns[i]), int(t.total_ns[i])


def test_op_redispatched_under_a_dispatch_mode_is_one_call() -> None:
    b = TraceBuilder()
    t = b.thread_track(1, 1)
    b.add_slice(t, 0, 100, "aten::mm", CPU)
    b.add_slice(t, 5, 90, "PythonDispatchMode", CPU)
    b.add_slice(t, 10, 60, "aten::mm", CPU)
    tr = b.build()
    # all 100 ns are the one aten::mm call; the mode is bookkeeping, not an op
    assert _one(tr, "aten::mm") == (1, 100, 100)
    assert op_table(tr).find("PythonDispatchMode") == -1


def test_op_redispatched_through_python_frames_is_one_call() -> None:
    # the emulated device's fallback with stacks: aten::sort > Python frames > aten::sort > aten::sort
    b = TraceBuilder()
    t = b.thread_track(1, 1)
    b.add_slice(t, 0, 100, "aten::sort", CPU)
    b.add_slice(t, 10, 80, "emulator.py(34): run_on_host", PY)
    b.add_slice(t, 20, 60, "aten::sort", CPU)
    b.add_slice(t, 25, 45, "aten::sort", CPU)
    b.add_slice(t, 30, 5, "aten::empty", CPU)
    tr = b.build()
    # self: outer 100-80, first copy 60-45, second copy 45-5; total: the outer span
    assert _one(tr, "aten::sort") == (1, 20 + 15 + 40, 100)
    assert _one(tr, "aten::empty") == (1, 5, 5)
    rows, self_ns = op_table(tr).call_rows(op_table(tr).find("aten::sort"))
    assert rows.tolist() == [0] and self_ns.tolist() == [75]


def test_same_name_under_another_op_is_another_call() -> None:
    b = TraceBuilder()
    t = b.thread_track(1, 1)
    b.add_slice(t, 0, 100, "aten::foo", CPU)
    b.add_slice(t, 10, 80, "aten::bar", CPU)
    b.add_slice(t, 20, 10, "aten::foo", CPU)
    b.add_slice(t, 200, 10, "aten::foo", CPU)  # a later sibling
    assert _one(b.build(), "aten::foo") == (3, 20 + 10 + 10, 120)


def test_same_name_on_another_thread_is_another_call() -> None:
    b = TraceBuilder()
    t1, t2 = b.thread_track(1, 1), b.thread_track(1, 2)
    b.add_slice(t1, 0, 100, "aten::mm", CPU)
    b.add_slice(t2, 10, 50, "aten::mm", CPU)
    assert _one(b.build(), "aten::mm") == (2, 150, 150)


def test_host_and_device_kept_apart() -> None:
    b = TraceBuilder()
    t = b.thread_track(1, 1)
    dev = b.process("neuron0", name="neuron:0", kind=ProcessKind.DEVICE)
    q = b.track(dev, "queue 0", TrackKind.DEVICE)
    for i in range(3):
        b.add_slice(t, i * 100, 50, "aten::mm", CPU)
        b.add_slice(q, i * 100 + 10, 20, "aten::mm", "kernel")
    tr = b.build()
    assert _one(tr, "aten::mm", "host") == (3, 150, 150)
    assert _one(tr, "aten::mm", "device") == (3, 60, 60)


def test_keys() -> None:
    assert op_key("ProfilerStep#12") == "ProfilerStep#*"
    assert op_key("aten::add.Tensor") == "aten::add"
    assert op_key("aten::_foreach_add_.List") == "aten::_foreach_add_"
    for name in ("aten::add", "aten::sort (copy to device)", "void k<T>(T*) [with T = float]",
                 "ProfilerStep#", "torch.nn.functional.linear", "[bold]"):
        assert op_key(name) == name


def test_steps_and_overloads_share_a_row() -> None:
    b = TraceBuilder()
    t = b.thread_track(1, 1)
    for s in range(4):
        b.add_slice(t, s * 100, 100, f"ProfilerStep#{s}", KinetoCat.USER_ANNOTATION)
        b.add_slice(t, s * 100 + 10, 20 + s, "aten::add.Tensor" if s % 2 else "aten::add", CPU)
    tr = b.build()
    tab = op_table(tr)
    assert not any(str(n).startswith("ProfilerStep#") and n != "ProfilerStep#*" for n in tab.name)
    assert _one(tr, "ProfilerStep#*") == (4, 400 - (20 + 21 + 22 + 23), 400)
    assert _one(tr, "aten::add.Tensor") == _one(tr, "aten::add") == (4, 86, 86)
    # annotations are listed (the TUI shows them) but summary and diff rank only ops
    i = tab.find("ProfilerStep#0")
    assert not tab.is_op[i] and tab.is_op[tab.find("aten::add")]
    # each call: the longest first
    rows, self_ns = tab.call_rows(tab.find("aten::add"))
    assert tr.slices.dur_ns[rows].tolist() == [23, 22, 21, 20] and self_ns.tolist() == [23, 22, 21, 20]


def test_table_order_and_offsets() -> None:
    b = TraceBuilder()
    t = b.thread_track(1, 1)
    rng = np.random.default_rng(0)
    names = [f"aten::op{i}" for i in range(7)]
    truth: dict[str, list[int]] = {n: [] for n in names}
    ts = 0
    for _ in range(500):
        n = names[int(rng.integers(0, 7))]
        d = int(rng.integers(1, 50))
        b.add_slice(t, ts, d, n, CPU)
        truth[n].append(d)
        ts += d
    tab = op_table(b.build())
    assert list(tab.self_ns) == sorted(tab.self_ns, reverse=True)
    assert tab.start[-1] == 500 and len(tab.start) == len(tab) + 1
    for i, n in enumerate(tab.name):
        rows, self_ns = tab.call_rows(i)
        assert tab.calls[i] == len(truth[n]) == len(rows)
        assert sorted(self_ns.tolist(), reverse=True) == sorted(truth[n], reverse=True) == self_ns.tolist()


@pytest.mark.parametrize("window", [None, 7])
def test_calls_come_longest_first_then_in_table_order(window: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each op's calls: longest first, equal durations in table order, with durations small enough to pack with
    the key and row in one integer and too long to (1e17 ns), and with the rows read a few at a time."""
    from neuron_prof.model import windows

    if window:
        monkeypatch.setattr(windows, "ROW_WINDOW", window)
    rng = np.random.default_rng(3)
    for big in (False, True, False, True):
        b = TraceBuilder()
        t = b.thread_track(1, 1)
        ts, want = 0, {}
        for r in range(int(rng.integers(1, 60))):
            d = int(rng.integers(1, 10**17 if big else 50))
            name = f"aten::op{int(rng.integers(0, 6))}"
            b.add_slice(t, ts, d, name, cat="cpu_op")
            want.setdefault(name, []).append((-d, r))
            ts += d
        tab = op_table(b.build())
        for name, calls in want.items():
            rows, self_ns = tab.call_rows(tab.find(name))
            assert rows.tolist() == [r for _, r in sorted(calls)]
            assert self_ns.tolist() == [-d for d, _ in sorted(calls)]
