"""Neuron Explorer device-profile tables into the trace: engine busy time, collectives, HBM counters.

Source: shared/design/neuron-explorer-facts.md, "Tables that matter for neuron-prof" (schema 7.4.0):

* ``ActiveTime`` (merged busy intervals per engine and physical core) → a DEVICE track per (core, engine);
* ``CcOp`` → COLLECTIVE slices with bytes, dtype, algorithm, replica group and bandwidths (bytes/s → GB/s);
* ``SystemProfileHbmUsage`` / ``HbmUsage`` → byte counters per device and HBM, total and per kind;
* ``Instruction`` → per-engine instruction count and time, aggregated batch by batch (never held whole);
* ``ExecutionInfo`` → executions per NEFF (times relative to the profile start, kept as given).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.loaders._explorer_events import device_process
from neuron_prof.loaders._explorer_tables import Tables
from neuron_prof.model import Arg, Cat, ProcessKind, TraceBuilder, TrackKind

CAT_ACTIVE = Cat.ENGINE_BUSY
_GB = 1e9


def _np(t: Any, c: str, fill: Any = 0) -> np.ndarray:
    return t.column(c).fill_null(fill).to_numpy(zero_copy_only=False)


def _span(t: Any) -> tuple[np.ndarray, np.ndarray]:
    """(start, duration) ns from start_ts and duration_ns, else end_ts - start_ts."""
    start, end, dur = _np(t, "start_ts"), _np(t, "end_ts", -1), _np(t, "duration_ns", -1)
    return start, np.where(dur >= 0, dur, np.where(end >= 0, np.maximum(end - start, 0), 0))


def add_active_time(b: TraceBuilder, tables: Tables) -> dict[str, int]:
    """ActiveTime slices; returns busy ns per ``"<pcore>:<engine>"``."""
    import pyarrow as pa

    i64 = pa.int64()
    t = tables.table("ActiveTime", {"start_ts": i64, "end_ts": i64, "duration_ns": i64, "engine": pa.string(),
                                    "pcore_idx": i64}, required=("start_ts", "engine"))
    if t is None or not t.num_rows:
        return {}
    start, dur = _span(t)
    engine = np.asarray(t.column("engine").fill_null("unknown").to_pylist(), dtype=object)
    core = _np(t, "pcore_idx")
    busy: dict[str, int] = {}
    cat = b.strings.intern(CAT_ACTIVE)
    for c, e in sorted({(int(c), str(e)) for c, e in zip(core.tolist(), engine.tolist())}):
        m = (core == c) & (engine == e)
        p = device_process(b, c)
        tr = b.track(p, f"neuron:{c} {e} engine", TrackKind.DEVICE, sort_index=10 + _ENGINES.get(e, 9))
        name = b.strings.intern(e)
        for s, d in zip(start[m].tolist(), dur[m].tolist()):
            b.add_slice_ids(tr, s, d, name, cat, -1)
        busy[f"{c}:{e}"] = int(dur[m].sum())
    return busy


_ENGINES = {"tensor": 0, "vector": 1, "scalar": 2, "gpsimd": 3, "sync": 4}


def add_cc_ops(b: TraceBuilder, tables: Tables) -> int:
    """CcOp rows as collective slices; returns how many."""
    import pyarrow as pa

    i64, s, f64 = pa.int64(), pa.string(), pa.float64()
    t = tables.table("CcOp", {"start_ts": i64, "end_ts": i64, "duration_ns": i64, "operation": s,
                              "algorithm": s, "num_elements": i64, "dtype": s, "op_id": i64, "stream_id": i64,
                              "stream_index": i64, "trigger_engine": s, "input_size": i64, "output_size": i64,
                              "algorithm_bandwidth": f64, "bus_bandwidth": f64, "trigger_start_ts": i64,
                              "cc_trigger_start_delay": i64, "replica_group_id": i64, "replica_group": s},
                     required=("start_ts", "operation"))
    if t is None or not t.num_rows:
        return 0
    start, dur = _span(t)
    rows = t.to_pylist()  # CcOp holds one row per collective: thousands, not millions
    p = b.process("neuron:cc", name="neuron collectives", kind=ProcessKind.DEVICE, sort_index=999)
    for i, r in enumerate(rows):
        tr = b.track(p, f"CC stream {r['stream_id'] if r['stream_id'] is not None else 0}", TrackKind.COLLECTIVE)
        args = {Arg.BYTES_IN: r["input_size"], Arg.BYTES_OUT: r["output_size"], Arg.DTYPE: r["dtype"],
                "algorithm": r["algorithm"], "num_elements": r["num_elements"], "op_id": r["op_id"],
                Arg.GROUP: r["replica_group_id"], Arg.RANKS: r["replica_group"], Arg.STREAM: r["stream_id"],
                "stream_index": r["stream_index"], "trigger_engine": r["trigger_engine"],
                "trigger_start_ts_ns": r["trigger_start_ts"], "trigger_delay_ns": r["cc_trigger_start_delay"],
                Arg.ALGBW: r["algorithm_bandwidth"] / _GB if r["algorithm_bandwidth"] is not None else None,
                Arg.BUSBW: r["bus_bandwidth"] / _GB if r["bus_bandwidth"] is not None else None}
        b.add_slice(tr, int(start[i]), int(dur[i]), str(r["operation"]), Cat.COLLECTIVE,
                    {k: v for k, v in args.items() if v is not None})
    return len(rows)


def add_hbm_counters(b: TraceBuilder, tables: Tables) -> dict[str, int]:
    """Counters from SystemProfileHbmUsage and HbmUsage per device and HBM: ``total_bytes`` a MEMORY track,
    every other ``*_bytes`` kind with data a COUNTER track in bytes; returns the peak of each total track."""
    import pyarrow as pa

    peaks: dict[str, int] = {}
    for table in ("SystemProfileHbmUsage", "HbmUsage"):
        kinds = sorted(c for c in tables.columns(table) if c.endswith("_bytes"))
        if not kinds or "timestamp" not in tables.columns(table):
            continue
        i64 = pa.int64()
        spec = {"timestamp": i64, "device_idx": i64, "hbm_idx": i64, **{k: i64 for k in kinds}}
        t = tables.table(table, spec, required=("timestamp",))
        if t is None or not t.num_rows:
            continue
        ts, dev, hbm = _np(t, "timestamp"), _np(t, "device_idx"), _np(t, "hbm_idx")
        o = np.argsort(ts, kind="stable")
        for d, h in sorted({(int(x), int(y)) for x, y in zip(dev.tolist(), hbm.tolist())}):
            m = o[(dev[o] == d) & (hbm[o] == h)]
            pid = f"neuron device {d}"
            p = b.process(pid, name=pid, kind=ProcessKind.DEVICE, sort_index=900 + d)
            for k in kinds:
                col = t.column(k)
                if col.null_count == len(col):
                    continue
                v = col.fill_null(0).to_numpy(zero_copy_only=False)[m]
                if k != "total_bytes" and not v.any():
                    continue
                name = f"{pid} HBM {h} {k.removesuffix('_bytes')}" + (" (device profile)" if table == "HbmUsage"
                                                                      else "")
                # the total is the memory the device holds; the kinds are its parts (not peaks of their own)
                tr = b.track(p, name, TrackKind.MEMORY if k == "total_bytes" else TrackKind.COUNTER, unit="bytes")
                b.c_ts.extend(ts[m].tolist())
                b.c_track.extend([tr] * len(m))
                b.c_value.extend(v.astype(np.float64).tolist())
                if k == "total_bytes":
                    peaks[name] = int(v.max()) if len(v) else 0
    return peaks


def instruction_totals(tables: Tables, top: int = 10) -> dict[str, Any]:
    """Per-engine instruction count and time, and the `top` opcodes by time, from the Instruction table read
    three columns and one batch at a time."""
    import pyarrow as pa

    if not tables.has("Instruction"):
        return {}
    eng: dict[str, list[int]] = {}
    ops: dict[str, int] = {}
    for batch in tables.batches("Instruction", ["engine", "opcode", "duration_ns"]):
        t = pa.Table.from_batches([batch])
        if "duration_ns" not in t.column_names:
            break
        if "engine" in t.column_names:
            for r in t.group_by("engine").aggregate([("duration_ns", "sum"), ("duration_ns", "count")]).to_pylist():
                acc = eng.setdefault(str(r["engine"]), [0, 0])
                acc[0] += int(r["duration_ns_count"])
                acc[1] += int(r["duration_ns_sum"] or 0)
        if "opcode" in t.column_names:
            for r in t.group_by("opcode").aggregate([("duration_ns", "sum")]).to_pylist():
                ops[str(r["opcode"])] = ops.get(str(r["opcode"]), 0) + int(r["duration_ns_sum"] or 0)
    return {"per_engine": {e: {"instructions": c, "time_ns": ns} for e, (c, ns) in sorted(eng.items())},
            "top_opcodes_ns": dict(sorted(ops.items(), key=lambda kv: -kv[1])[:top])}


def execution_totals(tables: Tables) -> dict[str, Any]:
    """Executions and their summed time per NEFF from ExecutionInfo."""
    import pyarrow as pa

    i64 = pa.int64()
    t = tables.table("ExecutionInfo", {"execution_index": i64, "neff_name": pa.string(),
                                       "execution_start_ts": i64, "execution_end_ts": i64,
                                       "num_subgraphs": i64, "row_count": i64}, required=("neff_name",))
    if t is None or not t.num_rows:
        return {}
    out: dict[str, dict[str, int]] = {}
    start, end = _np(t, "execution_start_ts"), _np(t, "execution_end_ts")
    for neff, a, z in zip(t.column("neff_name").fill_null("").to_pylist(), start.tolist(), end.tolist()):
        acc = out.setdefault(neff, {"executions": 0, "time_ns": 0})
        acc["executions"] += 1
        acc["time_ns"] += max(int(z) - int(a), 0)
    return out
