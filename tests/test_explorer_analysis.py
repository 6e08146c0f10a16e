"""Analyses on Neuron Explorer data: an engine's busy intervals are no device op, and a collective that the host
(collectives probe) and the device (CcOp) both saw is counted once."""

from __future__ import annotations

import pytest

from neuron_prof.analysis import analyze, op_table
from neuron_prof.analysis.collectives.match import extract_collectives
from neuron_prof.loaders import load
from neuron_prof.model import Arg, Cat, ProcessKind, Trace, TraceBuilder, TrackKind
from tests.fakes.explorer_profile import write_profile

MS = 1_000_000
T0 = 1_767_000_000_000_000_000


def test_engine_busy_intervals_are_not_device_ops(tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("explorer") / "profile"
    write_profile(folder)
    tr = load(folder)
    engines = {tr.slice_name(int(r)) for r in tr.slices_on(TrackKind.DEVICE)
               if tr.s(int(tr.slices.cat[int(r)])) == Cat.ENGINE_BUSY}
    assert engines, "the fixture writes ActiveTime"
    t = op_table(tr)
    device_ops = {str(n) for n, w in zip(t.name, t.where) if w == "device"}
    assert device_ops and not device_ops & engines, device_ops


def _host_and_device(n: int) -> Trace:
    """n all_reduces on the host's collective track (as the collectives probe writes them) and the same n on a
    device process's collective track (as the Explorer loader writes CcOp rows), 1 ms later on the device."""
    b = TraceBuilder()
    host = b.process(1, name="host", kind=ProcessKind.HOST, rank=0)
    b.thread_track(1, 1, "main")
    ht = b.track(host, "collectives", TrackKind.COLLECTIVE)
    dev = b.process("neuron:cc", name="neuron collectives", kind=ProcessKind.DEVICE)
    dt = b.track(dev, "CC stream 0", TrackKind.COLLECTIVE)
    for k in range(n):
        t = T0 + k * 20 * MS
        b.add_slice(ht, t, 4 * MS, "all_reduce", Cat.COLLECTIVE, {Arg.BYTES_IN: 1 << 20, Arg.GROUP: "0", Arg.SEQ: k})
        b.add_slice(dt, t + MS, 2 * MS, "AllReduce", Cat.COLLECTIVE, {Arg.BYTES_IN: 1 << 20, Arg.GROUP: 0})
    b.metadata.update({"rank": 0})
    return b.build()


def test_a_collective_seen_by_host_and_device_is_one() -> None:
    tr = _host_and_device(5)
    per_rank = extract_collectives(tr)
    assert {r: (c.source, len(c)) for r, c in per_rank.items()} == {0: ("probe", 5)}
    coll = [f for f in analyze(tr) if f.kind == "collective"]
    assert [f.count for f in coll] == [5], [(f.title, f.count) for f in coll]


def test_device_collectives_alone_are_used() -> None:
    b = TraceBuilder()
    b.process(1, name="host", kind=ProcessKind.HOST, rank=0)
    b.thread_track(1, 1, "main")
    dev = b.process("neuron:cc", name="neuron collectives", kind=ProcessKind.DEVICE)
    dt = b.track(dev, "CC stream 0", TrackKind.COLLECTIVE)
    for k in range(3):
        b.add_slice(dt, T0 + k * 20 * MS, 2 * MS, "AllReduce", Cat.COLLECTIVE, {Arg.BYTES_IN: 1 << 20, Arg.GROUP: 0})
    per_rank = extract_collectives(b.build())
    assert {r: (c.source, len(c)) for r, c in per_rank.items()} == {0: ("device_collective", 3)}
