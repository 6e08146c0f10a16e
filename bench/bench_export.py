"""Export benchmark: .pftrace written by hand from numpy columns vs. by perfetto's proto objects, and the JSON size.

    python -m bench.bench_export                 # 1M-event synthetic Kineto-like trace
    python -m bench.bench_export --events 200000 --proto-events 100000
    python -m bench.bench_export --trace run/trace.json.gz   # a real trace (through neuron_prof.load)

Prints one table: events/s, bytes/event and size relative to compact Chrome JSON for each writer. The proto
writer builds one `TracePacket` object per packet with the same layout and interning as the shipped writer
(what perfetto-facts.md calls "upb object per packet + interning"); it exists to justify the hand encoder.
An event is a slice, instant or counter sample of the model (a slice is two packets in the file).
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import orjson

from neuron_prof.model import ProcessKind, Trace, TraceBuilder, TrackKind

T0 = 1_790_857_026_000_000_000


def synthetic(n_events: int, seed: int = 0) -> Trace:
    """A Kineto-like trace built from columns: per call a python_function span, a cpu_op with shapes, a nested
    cudaLaunchKernel, its kernel on a GPU stream with an ac2g flow, a memory counter sample; every 10th call an
    instant. About 5.5 events per call."""
    rng = np.random.default_rng(seed)
    calls = max(1, int(n_events / 5.1))
    b = TraceBuilder()
    host = b.process(10115, "python3", rank=0)
    gpu = b.process(0, "GPU 0", kind=ProcessKind.DEVICE)
    main = b.thread_track(10115, 10115, "python3 main")
    stream = b.thread_track(0, 7, "stream 7", kind=TrackKind.DEVICE)
    mem = b.track(host, "neuron:0 allocated", TrackKind.MEMORY, unit="bytes")
    del gpu
    ops = ["aten::addmm", "aten::mm", "aten::gelu", "aten::native_layer_norm", "aten::_softmax", "aten::bmm"]
    kernels = ["ampere_sgemm_128x64_tn", "ampere_sgemm_128x128_nn", "vectorized_elementwise_kernel<4, Gelu>",
               "vectorized_layer_norm_kernel<float>", "cunn_SoftMaxForward<4, float>", "ampere_sgemm_64x64_nn"]
    op_ids = [b.strings.intern(o) for o in ops]
    k_ids = [b.strings.intern(k) for k in kernels]
    py_ids = [b.strings.intern(f"nn.Module: Layer_{i}") for i in range(40)]
    c_cpu, c_py, c_rt, c_k = (b.strings.intern(c) for c in ("cpu_op", "python_function", "cuda_runtime", "kernel"))
    launch = b.strings.intern("cudaLaunchKernel")
    which = rng.integers(0, len(ops), calls)
    m = rng.integers(1, 64, calls) * 64
    gap = rng.integers(4000, 9000, calls)
    t = T0 + np.cumsum(gap)
    add_raw = b.args.add_raw
    for i in range(calls):
        ti, w_, mi = int(t[i]), int(which[i]), int(m[i])
        b.add_slice_ids(main, ti, 3800, py_ids[i % 40], c_py,
                        add_raw(b'{"Python parent id":%d,"Python id":%d,"Python thread":0}' % (i, i + 1)))
        s_op = b.add_slice_ids(main, ti + 100, 3500, op_ids[w_], c_cpu, add_raw(
            b'{"External id":%d,"Record function id":0,"Sequence number":%d,"Fwd thread id":0,'
            b'"Input Dims":[[%d,1024],[1024,1024],[]],"Input type":["float","float","Scalar"],'
            b'"Input Strides":[[1024,1],[1024,1],[]],"Concrete Inputs":["","","1"]}' % (i, i, mi)))
        s_rt = b.add_slice_ids(main, ti + 500, 300, launch, c_rt,
                               add_raw(b'{"External id":%d,"cbid":211,"correlation":%d}' % (i, i + 7)))
        s_k = b.add_slice_ids(stream, ti + 1000, 2500 + (mi & 1023), k_ids[w_], c_k, add_raw(
            b'{"External id":%d,"queued":0,"device":0,"context":1,"stream":7,"correlation":%d,"registers per thread":'
            b'%d,"shared memory":0,"blocks per SM":%.6f,"warps per SM":4.0,"grid":[%d,1,1],"block":[128,1,1],'
            b'"est. achieved occupancy %%":25}' % (i, i + 7, 32 + w_, mi / 132.0, mi)))
        b.add_flow(s_rt, s_k, i + 7, "ac2g", "ac2g")
        b.add_counter(mem, ti + 200, float(1 << 30) + mi * 4096)
        del s_op
        if i % 10 == 0:
            b.add_instant(main, ti + 150, "[memory]", "cpu_instant_event", {"Bytes": mi * 4096, "Device Id": 0})
    return b.build()


def tile(trace: Trace, n_events: int) -> Trace:
    """`trace` repeated back to back (times shifted by its span) until it holds about `n_events` events."""
    from neuron_prof.model import ArgsStore, CounterTable, FlowTable, InstantTable, SliceTable

    reps = max(1, -(-n_events // max(trace.n_events, 1)))
    t0, t1 = trace.time_range()
    span = t1 - t0 + 1000
    args, _ = ArgsStore.concat([trace.args] * reps)
    na, ns_, fid = len(trace.args), len(trace.slices), trace.flows.flow_id
    step_id = int(fid.max()) + 1 if len(fid) else 0

    def rep(tab, cls, shift):  # type: ignore[no-untyped-def]
        cols = {}
        for name in cls.DTYPES:
            a = getattr(tab, name)
            parts = []
            for k in range(reps):
                x = a
                if name == "ts_ns":
                    x = a + k * span
                elif name == "args":
                    x = np.where(a >= 0, a + k * na, -1)
                elif name in shift:
                    x = a + k * shift[name]
                parts.append(x)
            cols[name] = np.concatenate(parts)
        return cls(**cols)

    return trace.replace(slices=rep(trace.slices, SliceTable, {}), instants=rep(trace.instants, InstantTable, {}),
                         counters=rep(trace.counters, CounterTable, {}),
                         flows=rep(trace.flows, FlowTable, {"src": ns_, "dst": ns_, "flow_id": step_id}), args=args)


def write_json(trace: Trace, path: Path) -> None:
    """Compact Chrome JSON through the project's exporter when present, else written here the way Kineto lays it
    out (X slices, i instants, C counters, s/f flow pairs, M names), without whitespace."""
    try:
        from neuron_prof.exporters.chrome_json import write_chrome_json
    except ImportError:
        write_chrome_json = None
    if write_chrome_json is not None:
        write_chrome_json(trace, path)
        return
    s, sl, it, c = trace.strings, trace.slices, trace.instants, trace.counters
    pid = [p.pid for p in trace.processes]
    tk = [(pid[t.process], t.tid) for t in trace.tracks]
    with open(path, "wb") as f:
        f.write(b'{"traceEvents":[')
        first = True
        for i in range(len(sl)):
            p, tid = tk[int(sl.track[i])]
            ev = {"ph": "X", "cat": s[sl.cat[i]], "name": s[sl.name[i]], "pid": p, "tid": tid,
                  "ts": int(sl.ts_ns[i]) / 1000, "dur": int(sl.dur_ns[i]) / 1000, "args": trace.slice_args(i)}
            f.write((b"" if first else b",") + orjson.dumps(ev))
            first = False
        for i in range(len(it)):
            p, tid = tk[int(it.track[i])]
            f.write(b"," + orjson.dumps({"ph": "i", "s": "t", "cat": s[it.cat[i]], "name": s[it.name[i]], "pid": p,
                                         "tid": tid, "ts": int(it.ts_ns[i]) / 1000, "args": trace.instant_args(i)}))
        fl = trace.flows
        for i in range(len(fl)):
            for ph, row in (("s", int(fl.src[i])), ("f", int(fl.dst[i]))):
                p, tid = tk[int(sl.track[row])]
                ev = {"ph": ph, "id": int(fl.flow_id[i]), "pid": p, "tid": tid, "ts": int(sl.ts_ns[row]) / 1000,
                      "cat": s[fl.cat[i]], "name": s[fl.name[i]]}
                if ph == "f":
                    ev["bp"] = "e"
                f.write(b"," + orjson.dumps(ev))
        for pr in trace.processes:
            f.write(b"," + orjson.dumps({"ph": "M", "name": "process_name", "pid": pr.pid, "args": {"name": pr.name}}))
        for t in trace.tracks:
            if t.tid is not None:
                f.write(b"," + orjson.dumps({"ph": "M", "name": "thread_name", "pid": pid[t.process], "tid": t.tid,
                                             "args": {"name": t.name}}))
        for i in range(len(c)):
            tr = trace.tracks[int(c.track[i])]
            f.write(b"," + orjson.dumps({"ph": "C", "name": tr.name, "pid": pid[tr.process],
                                         "ts": int(c.ts_ns[i]) / 1000, "args": {"value": float(c.value[i])}}))
        f.write(b"]}")


def write_protos(trace: Trace, path: Path, limit: int | None = None) -> int:
    """The same packets built as perfetto proto objects (one TracePacket per packet, manual framing).

    Returns the number of model events written (slices + instants + counters, up to `limit`).
    """
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket, TrackEvent

    from neuron_prof.exporters._pftrace_layout import lanes, plan, slice_order

    lay = plan(trace, 0)
    sl, s = trace.slices, trace.strings
    order = slice_order(sl.ts_ns, sl.dur_ns, sl.track)
    lane = lanes(sl.ts_ns, sl.dur_ns, sl.track, order)
    assert not lane.any(), "proto bench writer expects no overlaps"
    if limit is not None:
        order = order[:limit]
    flows: dict[int, list[int]] = {}
    for a, z, fid in zip(trace.flows.src.tolist(), trace.flows.dst.tolist(), trace.flows.flow_id.tolist()):
        flows.setdefault(a, []).append(fid)
        flows.setdefault(z, []).append(fid)
    names: dict[int, None] = {}
    cats: dict[int, None] = {}
    dan: dict[str, int] = {}
    dsv: dict[str, int] = {}
    tuuid = lay.track_uuid.tolist()

    def annot(a: object, k: str, v: object) -> None:
        if k:
            a.name_iid = dan.setdefault(k, len(dan) + 1)  # type: ignore[attr-defined]
        if isinstance(v, bool):
            a.bool_value = v  # type: ignore[attr-defined]
        elif isinstance(v, int):
            a.int_value = v  # type: ignore[attr-defined]
        elif isinstance(v, float):
            a.double_value = v  # type: ignore[attr-defined]
        elif isinstance(v, str):
            a.string_value_iid = dsv.setdefault(v, len(dsv) + 1)  # type: ignore[attr-defined]
        elif isinstance(v, list):
            for x in v:
                annot(a.array_values.add(), "", x)  # type: ignore[attr-defined]

    n = 0
    with open(path, "wb") as f:
        seen_n, seen_c, seen_d, seen_v = 0, 0, 0, 0
        first = True
        batch: list[bytes] = []
        for i in order.tolist():
            pb = TracePacket()
            pb.timestamp = int(sl.ts_ns[i])
            pb.trusted_packet_sequence_id = 2
            pb.sequence_flags = 2
            te = pb.track_event
            te.type = TrackEvent.TYPE_SLICE_BEGIN
            te.track_uuid = tuuid[int(sl.track[i])]
            nid = int(sl.name[i])
            te.name_iid = nid + 1
            te.category_iids.append(int(sl.cat[i]) + 1)
            names[nid] = None
            cats[int(sl.cat[i])] = None
            for k, v in trace.slice_args(i).items():
                annot(te.debug_annotations.add(), k, v)
            te.flow_ids.extend(flows.get(i, ()))
            pe = TracePacket()
            pe.timestamp = int(sl.ts_ns[i] + sl.dur_ns[i])
            pe.trusted_packet_sequence_id = 2
            pe.track_event.type = TrackEvent.TYPE_SLICE_END
            pe.track_event.track_uuid = te.track_uuid
            if len(dan) > seen_d or len(dsv) > seen_v or len(names) > seen_n or len(cats) > seen_c or first:
                ip = TracePacket()
                ip.trusted_packet_sequence_id = 2
                ip.sequence_flags = 3 if first else 2
                first = False
                for sid in list(cats)[seen_c:]:
                    e = ip.interned_data.event_categories.add()
                    e.iid, e.name = sid + 1, s[sid]
                for sid in list(names)[seen_n:]:
                    e = ip.interned_data.event_names.add()
                    e.iid, e.name = sid + 1, s[sid]
                for k, iid in list(dan.items())[seen_d:]:
                    e = ip.interned_data.debug_annotation_names.add()
                    e.iid, e.name = iid, k
                for k, iid in list(dsv.items())[seen_v:]:
                    e = ip.interned_data.debug_annotation_string_values.add()
                    e.iid, e.str = iid, k.encode()
                seen_n, seen_c, seen_d, seen_v = len(names), len(cats), len(dan), len(dsv)
                batch.append(_frame(ip.SerializeToString()))
            batch.append(_frame(pb.SerializeToString()))
            batch.append(_frame(pe.SerializeToString()))
            n += 1
            if len(batch) > 20000:
                f.write(b"".join(batch))
                batch.clear()
        f.write(b"".join(batch))
    return n


def _frame(body: bytes) -> bytes:
    from neuron_prof.exporters._pftrace_wire import varint

    return b"\x0a" + varint(len(body)) + body


def _timed(fn, *a):  # type: ignore[no-untyped-def]
    """(result, wall seconds, CPU seconds): on a shared machine CPU time is the steadier number."""
    gc.collect()
    t, c = time.perf_counter(), time.process_time()
    r = fn(*a)
    return r, time.perf_counter() - t, time.process_time() - c


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=float, default=1e6, help="events (default 1e6; 1e6 and 1000000 both work)")
    ap.add_argument("--proto-events", type=int, default=200_000, help="slices for the proto-object writer")
    ap.add_argument("--trace", help="benchmark this trace file (repeated with shifted times to --events) instead")
    ns = ap.parse_args(argv)
    ns.events = int(ns.events)
    from neuron_prof.exporters.perfetto import write_pftrace

    if ns.trace:
        import neuron_prof

        trace, t_load, _ = _timed(neuron_prof.load, ns.trace)
        print(f"loaded {ns.trace} in {t_load:.2f} s: {trace}")
        trace = tile(trace, ns.events)
        print(f"repeated to {trace}")
    else:
        trace, t_gen, _ = _timed(synthetic, ns.events)
        print(f"generated {trace} in {t_gen:.1f} s")
    n_ev = trace.n_events
    from neuron_prof.loaders.pftrace.reader import load_pftrace

    with tempfile.TemporaryDirectory() as d:
        pf, js, pr = Path(d, "t.pftrace"), Path(d, "t.json"), Path(d, "p.pftrace")
        _, w_hand, c_hand = _timed(write_pftrace, trace, pf)
        _, w_json, c_json = _timed(write_json, trace, js)
        n_pr, w_proto, c_proto = _timed(write_protos, trace, pr, ns.proto_events)
        back, w_load, c_load = _timed(load_pftrace, pf)
        assert back.n_events == n_ev, (back, trace)
        size_pf, size_js, size_pr = pf.stat().st_size, js.stat().st_size, pr.stat().st_size
    rows = [("write .pftrace, hand-encoded (shipped)", n_ev, w_hand, c_hand, size_pf),
            ("write .pftrace, proto objects (reference)", n_pr, w_proto, c_proto, size_pr),
            ("write Chrome JSON, compact", n_ev, w_json, c_json, size_js),
            ("load .pftrace (load_pftrace)", n_ev, w_load, c_load, None)]
    print(f"\n{'step':42} {'events':>9} {'wall s':>7} {'cpu s':>7} {'events/s cpu':>13} {'bytes/event':>12} {'x JSON':>7}")
    for name, n, wall, cpu, size in rows:
        sz = f"{size / n:>12.1f} {(size / n) / (size_js / n_ev):>7.2f}" if size else f"{'':>12} {'':>7}"
        print(f"{name:42} {n:>9,} {wall:>7.2f} {cpu:>7.2f} {n / cpu:>13,.0f} {sz}")
    print(f"\n.pftrace / JSON size ratio: {size_pf / size_js:.3f} (target <= 0.4); hand writer {n_ev / c_hand:,.0f} "
          f"events/s CPU, {n_ev / w_hand:,.0f} wall (target >= 500k); hand / proto objects: "
          f"{(n_ev / c_hand) / (n_pr / c_proto):.1f}x; cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
