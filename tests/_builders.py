"""Builders shared by several test modules, each independent of the code under test: a tiny training loop,
event counts read with plain json/protobuf, Kineto-shaped JSON text, a .pftrace another tool would write, and
an exact comparison of two Traces."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
    DebugAnnotation,
    TracePacket,
    TrackEvent,
)
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
    Trace as TraceProto,
)

from neuron_prof.analysis import Finding
from neuron_prof.model import Meta, Trace
from tests.conftest import KINETO_DIR

if TYPE_CHECKING:
    import torch
    from torch import nn


# ---- a training loop and counts read without our loader ---------------------------------------------------
# torch is imported where it is used: the loader, analysis, exporter and TUI tests that use the other builders
# run without torch (`make test-pythons`)
def tiny_model() -> tuple[nn.Module, torch.optim.Optimizer]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-2)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, i: int) -> float:
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(i)
    x, y = torch.randn(4, 16, generator=g), torch.randn(4, 8, generator=g)
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return float(loss.detach())


def json_events(path: Path) -> list[dict[str, Any]]:
    """traceEvents read with plain json/gzip (not our loader)."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:  # type: ignore[operator]
        return json.load(f)["traceEvents"]  # type: ignore[no-any-return]


def json_complete_count(path: Path) -> int:
    return sum(1 for e in json_events(path) if e.get("ph") == "X")


def pftrace_slice_count(path: Path) -> int:
    """Slices in a .pftrace: TrackEvent SLICE_BEGIN packets, parsed with the perfetto package's protos."""
    t = TraceProto()
    t.ParseFromString(path.read_bytes())
    return sum(1 for p in t.packet
               if p.HasField("track_event") and p.track_event.type == TrackEvent.TYPE_SLICE_BEGIN)


def slice_names(trace: Trace) -> set[str]:
    return {trace.strings[int(i)] for i in set(trace.slices.name.tolist())}


# ---- findings and Kineto-shaped JSON text ----------------------------------------------------------------
def one(findings: list[Finding], kind: str, **match: Any) -> Finding:
    """The one finding of `kind` whose attributes equal `match` (asserts there is exactly one)."""
    got = [f for f in findings if f.kind == kind and all(getattr(f, k) == v for k, v in match.items())]
    assert len(got) == 1, f"{kind} {match}: {[f.title for f in findings if f.kind == kind]}"
    return got[0]


def stack(*user: str) -> str:
    """A Kineto "Call stack" (innermost first) with torch frames around the user's frames."""
    torch_frame = "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py(1751): _call_impl"
    return ";".join([torch_frame, *user, "/usr/lib/python3.11/runpy.py(88): _run_code"])


KINETO_BASE = 1_700_000_000_000_000_000
"""baseTimeNanoseconds of the texts kineto_text writes."""


def kineto_event(i: int, **kw: Any) -> dict[str, Any]:
    """Complete event `op{i}`: 5 us at 10*i us on pid 1 / tid 1 (`kw` overrides any field)."""
    e = {"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": 10.0 * i, "dur": 5.0,
         "args": {"External id": i}}
    e.update(kw)
    return e


def kineto_text(events: list[dict[str, Any]]) -> str:
    """Kineto's layout: one event per line inside traceEvents, traceName after it."""
    body = ",\n".join("  " + json.dumps(e) for e in events)
    return (f'{{\n  "schemaVersion": 1,\n  "baseTimeNanoseconds": {KINETO_BASE},\n'
            f'  "traceEvents": [\n{body}\n  ],\n  "traceName": "t"\n}}\n')


def kineto_seed_bytes() -> bytes:
    """A small real Kineto trace with metadata, flows, instants and string pids (16 kB once gunzipped), or
    eight plain events where ../shared is absent: the seed the fuzz tests mutate."""
    seed = KINETO_DIR / "triton_example_triton_example.json.gz"
    if seed.is_file():
        return gzip.decompress(seed.read_bytes())
    return kineto_text([kineto_event(i) for i in range(8)]).encode()


# ---- a .pftrace another tool would write -------------------------------------------------------------------
FOREIGN_T0 = 1_790_000_000_000_000_000
B, E, I, C = (TrackEvent.TYPE_SLICE_BEGIN, TrackEvent.TYPE_SLICE_END, TrackEvent.TYPE_INSTANT,  # noqa: E741
              TrackEvent.TYPE_COUNTER)


def foreign_trace() -> bytes:
    """A TrackEvent trace as another tool would write it: interned names, unsorted packets, terminating
    flows."""
    tr = TraceProto()

    def pkt(**kw):  # type: ignore[no-untyped-def]
        p = tr.packet.add()
        p.trusted_packet_sequence_id = 7
        for k, v in kw.items():
            setattr(p, k, v)
        return p

    p = pkt(sequence_flags=TracePacket.SEQ_INCREMENTAL_STATE_CLEARED)
    for iid, name in ((1, "outer"), (2, "inner"), (3, "kernel")):
        p.interned_data.event_names.add(iid=iid, name=name)
    p.interned_data.event_categories.add(iid=1, name="cpu_op")
    p.interned_data.debug_annotation_names.add(iid=1, name="shape")
    p.interned_data.debug_annotation_string_values.add(iid=1, str=b"float32")
    for uuid, body in ((10, {"process": {"pid": 99, "process_name": "trainer"}}),
                       (11, {"thread": {"pid": 99, "tid": 100, "thread_name": "main"}}),
                       (12, {"name": "compile", "parent_uuid": 10}),
                       (13, {"name": "hbm used", "parent_uuid": 10, "counter": {"unit": 3}}),
                       (14, {"name": "queue 0", "parent_uuid": 10})):
        d = pkt(timestamp=FOREIGN_T0).track_descriptor
        d.uuid = uuid
        for k, v in body.items():
            if isinstance(v, dict):
                for kk, vv in v.items():
                    setattr(getattr(d, k), kk, vv)
            else:
                setattr(d, k, v)

    def ev(ts, typ, uuid, **kw):  # type: ignore[no-untyped-def]
        p = pkt(timestamp=ts, sequence_flags=TracePacket.SEQ_NEEDS_INCREMENTAL_STATE)
        te = p.track_event
        te.type = typ
        te.track_uuid = uuid
        for k, v in kw.items():
            if k in ("flow_ids", "terminating_flow_ids", "category_iids"):
                getattr(te, k).extend(v)
            elif k == "annots":
                for a in v:
                    te.debug_annotations.add().CopyFrom(a)
            else:
                setattr(te, k, v)
        return te

    shape = DebugAnnotation(name_iid=1, string_value_iid=1)
    dims = DebugAnnotation(name="dims")
    dims.array_values.add(int_value=2)
    dims.array_values.add(int_value=3)
    # file order is not time order: ends before begins, inner before outer
    ev(FOREIGN_T0 + 90, E, 11)
    ev(FOREIGN_T0 + 40, E, 11)
    ev(FOREIGN_T0 + 10, B, 11, name_iid=2, category_iids=[1], annots=[shape, dims], flow_ids=[555])
    ev(FOREIGN_T0, B, 11, name_iid=1, category_iids=[1])
    ev(FOREIGN_T0 + 50, B, 14, name_iid=3, terminating_flow_ids=[555])
    ev(FOREIGN_T0 + 80, E, 14)
    ev(FOREIGN_T0 + 5, B, 12, name="compile mm")
    ev(FOREIGN_T0 + 8, E, 12)
    ev(FOREIGN_T0 + 60, I, 11, name="marker")
    ev(FOREIGN_T0 + 1, C, 13, counter_value=1 << 20)
    ev(FOREIGN_T0 + 2, C, 13, double_counter_value=2.5e6)
    ev(FOREIGN_T0 + 95, B, 14, name="never ends")
    return tr.SerializeToString()


# ---- comparing two Traces ---------------------------------------------------------------------------------
def assert_same(a: Trace, b: Trace) -> None:
    """Same processes, tracks, events (ts to the ns), names, args, flows, findings and metadata."""
    pa = [(p.pid, p.name, p.kind, p.rank, p.sort_index, p.labels) for p in a.processes]
    assert pa == [(p.pid, p.name, p.kind, p.rank, p.sort_index, p.labels) for p in b.processes]
    ta = [(t.process, t.name, t.kind, t.tid, t.sort_index, t.unit) for t in a.tracks]
    assert ta == [(t.process, t.name, t.kind, t.tid, t.sort_index, t.unit) for t in b.tracks]
    for tab in ("slices", "instants", "counters"):
        x, y = getattr(a, tab), getattr(b, tab)
        assert len(x) == len(y), tab
        assert np.array_equal(x.ts_ns, y.ts_ns) and np.array_equal(x.track, y.track), tab
        if tab != "counters":
            assert [a.s(i) for i in x.name] == [b.s(i) for i in y.name]
            assert [a.s(i) for i in x.cat] == [b.s(i) for i in y.cat]
            assert [a.args.get(int(i)) for i in x.args] == [b.args.get(int(i)) for i in y.args]
    assert np.array_equal(a.slices.dur_ns, b.slices.dur_ns)
    assert np.array_equal(a.counters.value, b.counters.value)
    assert np.array_equal(a.flows.src, b.flows.src) and np.array_equal(a.flows.dst, b.flows.dst)
    assert np.array_equal(a.flows.flow_id, b.flows.flow_id)
    assert [a.s(i) for i in a.flows.cat] == [b.s(i) for i in b.flows.cat]
    assert a.findings == b.findings
    skip = (Meta.SOURCE, Meta.SOURCE_FORMAT, Meta.WARNINGS, Meta.KINETO)
    assert {k: v for k, v in a.metadata.items() if k not in skip} == \
           {k: v for k, v in b.metadata.items() if k not in skip}
