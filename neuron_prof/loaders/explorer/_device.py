"""Neuron Explorer device-profile tables into the trace, placed on the host clock.

Source: shared/design/neuron-explorer-facts.md and neuron-explorer-schema-7.4.0.txt (aws-neuron-sdk
profile-schema-reference.rst). A device profile is one NTFF: one logical core of one process (``DeviceProfileList``:
``instance_id``, ``process_id``, ``nc_id``; else ``Metadata.neuroncore_idx``). Its times are on the device clock
and are placed on the host clock through `_explorer_clock` before anything is added. ``pcore_idx`` in these
tables is the physical core WITHIN the logical core (0 or 1 with LNC2):

* ``ActiveTime`` (merged busy intervals per engine) → a DEVICE track per engine of the logical core,
  ``neuron:<nc> tensor engine``; with two physical cores, ``neuron:<nc> pcore <p> tensor engine``;
* ``CcOp`` → COLLECTIVE slices with bytes, dtype, algorithm, replica group and bandwidths (bytes/s → GB/s);
* ``HbmUsage`` / ``DmaUsage`` (``current_throughput``, bytes/s) → bandwidth counters in B/s;
* ``Error`` (hardware NaN, out-of-bounds...) → instants ``neuron:<nc> errors`` (cat ``neuron_explorer.error``)
  with type, description and physical core, which the ``device_error`` finding reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from neuron_prof.loaders.explorer._clock import DeviceClock, fallback, from_executions
from neuron_prof.loaders.explorer._events import Executions, device_process
from neuron_prof.loaders.explorer._tables import Tables
from neuron_prof.model import Arg, Cat, ProcessKind, TraceBuilder, TrackKind
from neuron_prof.model.order import sorted_unique

CAT_ACTIVE = Cat.ENGINE_BUSY
CAT_ERROR = Cat.DEVICE_ERROR
DEVICE_TABLES = ("ActiveTime", "CcOp", "HbmUsage", "DmaUsage", "Error", "Instruction", "ExecutionInfo")
_GB = 1e9
_ENGINES = {"tensor": 0, "vector": 1, "scalar": 2, "gpsimd": 3, "sync": 4}


def _np(t: Any, c: str, fill: Any = 0) -> np.ndarray:
    return t.column(c).fill_null(fill).to_numpy(zero_copy_only=False)


@dataclass
class DeviceProfile:
    """Where one device profile's rows go: its core, its process in the builder, its clock."""

    nc: int
    pid: int | None
    process: int
    clock: DeviceClock
    exec_start: np.ndarray
    """Device-clock (start, end) of each ExecutionInfo execution, by execution_index."""
    exec_end: np.ndarray
    exec_rows: np.ndarray
    """Host slice row of the nc_exec_running paired with each execution (-1: none)."""

    def span(self, t: Any) -> tuple[np.ndarray, np.ndarray]:
        """Host (start, duration) ns of a table's rows from start_ts and end_ts (else start + duration_ns)."""
        start, end, dur = _np(t, "start_ts"), _np(t, "end_ts", -1), _np(t, "duration_ns", -1)
        end = np.where(end >= 0, end, start + np.maximum(dur, 0))
        return self.clock.span(start, end)


def device_profile(b: TraceBuilder, tables: Tables, meta: dict[str, Any], execs: Executions,
                   warnings: list[str]) -> DeviceProfile | None:
    """The device profile in `tables` and its clock; None when the folder has no device-profile table."""
    import pyarrow as pa

    if not any(tables.has(t) for t in DEVICE_TABLES):
        return None
    nc, pid = meta.get("neuroncore_idx"), None
    if tables.need("device profile's process", "DeviceProfileList", ("process_id", "nc_id")):
        t = tables.table("DeviceProfileList", {"process_id": pa.int64(), "nc_id": pa.int64()})
        if t is not None and t.num_rows:
            pid, nc = t.column("process_id")[0].as_py(), t.column("nc_id")[0].as_py()
        elif tables.rows:  # the device profile of another process of the run (rows cut to one process)
            return None
    if nc is None:
        cores = sorted({c for _, c in execs.by_core})
        nc = cores[0] if len(cores) == 1 else 0
    first_hw = meta.get("first_hw_timestamp")
    ds = de = np.zeros(0, dtype=np.int64)
    if tables.need("device clock anchors", "ExecutionInfo", ("execution_start_ts", "execution_end_ts")):
        t = tables.table("ExecutionInfo", {"execution_index": pa.int64(), "execution_start_ts": pa.int64(),
                                           "execution_end_ts": pa.int64()})
        if t is not None and t.num_rows:
            o = np.argsort(_np(t, "execution_index"), kind="stable")
            ok = ~(t.column("execution_start_ts").is_null().to_numpy(zero_copy_only=False))[o]
            base = int(first_hw) if first_hw is not None else 0
            ds, de = _np(t, "execution_start_ts")[o][ok] + base, _np(t, "execution_end_ts")[o][ok] + base
            if first_hw is None:
                warnings.append("Neuron Explorer Metadata.first_hw_timestamp missing: ExecutionInfo times (relative "
                                "to the profile start) are taken as device-clock times")
    host = execs.of(pid, int(nc))
    rows = np.full(len(ds), -1, dtype=np.int64)
    clock = None
    if host is not None and len(ds):
        clock = from_executions(ds, de, host[0], host[1])
        if clock is not None:
            paired = np.arange(len(ds)) + clock.pair_offset
            ok = (paired >= 0) & (paired < len(host[2]))
            rows[ok] = host[2][paired[ok]]
            if clock.note:
                warnings.append(f"Neuron Explorer device profile of NeuronCore {nc}: {clock.note}")
    if clock is None:
        sample = np.asarray([first_hw] if first_hw is not None else [], dtype=np.int64)
        clock = fallback(first_hw, meta.get("first_ts"), sample)
        if clock.how == "none":
            host_timeline = bool(execs.counts) or b.n_slices > 0
            warnings.append(f"Neuron Explorer device profile of NeuronCore {nc}: its times are on the device clock "
                            "and nothing places them on the host clock (no ExecutionInfo paired with the system "
                            "profile's nc_exec_running, no Metadata.first_ts): "
                            + ("its timeline rows are left out (the host timeline stays on Unix time)"
                               if host_timeline else "kept on the device clock"))

    proc = device_process(b, int(nc), pid if execs.multi_process else None)
    return DeviceProfile(int(nc), pid, proc, clock, ds, de, rows)


def _label(b: TraceBuilder, dev: DeviceProfile) -> str:
    return b.processes[dev.process].name


def add_active_time(b: TraceBuilder, tables: Tables, dev: DeviceProfile) -> dict[str, int]:
    """ActiveTime slices on the logical core's engines; returns busy ns per ``"<nc>:<engine>"`` (``"<nc>.<p>:
    <engine>"`` for physical core p of an LNC2 core)."""
    import pyarrow as pa

    i64 = pa.int64()
    if not tables.need("engine busy time", "ActiveTime", ("start_ts", "engine"), one_of=("end_ts", "duration_ns")):
        return {}
    t = tables.table("ActiveTime", {"start_ts": i64, "end_ts": i64, "duration_ns": i64, "engine": pa.string(),
                                    "pcore_idx": i64})
    if t is None or not t.num_rows:
        return {}
    start, dur = dev.span(t)
    engine = np.asarray(t.column("engine").fill_null("unknown").to_pylist(), dtype=object)
    core = _np(t, "pcore_idx")
    split = len(sorted_unique(core)) > 1
    busy: dict[str, int] = {}
    cat = b.strings.intern(CAT_ACTIVE)
    label = _label(b, dev)
    for c, e in sorted({(int(c), str(e)) for c, e in zip(core.tolist(), engine.tolist())}):
        m = (core == c) & (engine == e)
        where = f"{label} pcore {c}" if split else label
        tr = b.track(dev.process, f"{where} {e} engine", TrackKind.DEVICE,
                     sort_index=10 + 10 * c + _ENGINES.get(e, 9))
        name = b.strings.intern(e)
        b.s_ts.extend(start[m].tolist())
        b.s_dur.extend(dur[m].tolist())
        n = int(m.sum())
        b.s_track.extend([tr] * n)
        b.s_name.extend([name] * n)
        b.s_cat.extend([cat] * n)
        b.s_args.extend([-1] * n)
        busy[f"{dev.nc}.{c}:{e}" if split else f"{dev.nc}:{e}"] = int(dur[m].sum())
    return busy


def add_cc_ops(b: TraceBuilder, tables: Tables, dev: DeviceProfile) -> int:
    """CcOp rows as collective slices (host clock); returns how many."""
    import pyarrow as pa

    i64, s, f64 = pa.int64(), pa.string(), pa.float64()
    if not tables.need("device collectives", "CcOp", ("start_ts", "operation"), one_of=("end_ts", "duration_ns")):
        return 0
    t = tables.table("CcOp", {"start_ts": i64, "end_ts": i64, "duration_ns": i64, "operation": s,
                              "algorithm": s, "num_elements": i64, "dtype": s, "op_id": i64, "stream_id": i64,
                              "stream_index": i64, "trigger_engine": s, "input_size": i64, "output_size": i64,
                              "algorithm_bandwidth": f64, "bus_bandwidth": f64, "trigger_start_ts": i64,
                              "cc_trigger_start_delay": i64, "replica_group_id": i64, "replica_group": s})
    if t is None or not t.num_rows:
        return 0
    start, dur = dev.span(t)
    trig = t.column("trigger_start_ts")
    trig_host = dev.clock.to_host(_np(t, "trigger_start_ts"))
    rows = t.to_pylist()  # CcOp holds one row per collective: thousands, not millions
    p = b.process("neuron:cc", name="neuron collectives", kind=ProcessKind.DEVICE, sort_index=999)
    for i, r in enumerate(rows):
        tr = b.track(p, f"CC stream {r['stream_id'] if r['stream_id'] is not None else 0}", TrackKind.COLLECTIVE)
        args = {Arg.BYTES_IN: r["input_size"], Arg.BYTES_OUT: r["output_size"], Arg.DTYPE: r["dtype"],
                "algorithm": r["algorithm"], "num_elements": r["num_elements"], "op_id": r["op_id"],
                Arg.GROUP: r["replica_group_id"], Arg.RANKS: r["replica_group"], Arg.STREAM: r["stream_id"],
                "stream_index": r["stream_index"], "trigger_engine": r["trigger_engine"],
                "trigger_start_ts_ns": int(trig_host[i]) if trig[i].is_valid else None,
                "trigger_delay_ns": r["cc_trigger_start_delay"],
                Arg.ALGBW: r["algorithm_bandwidth"] / _GB if r["algorithm_bandwidth"] is not None else None,
                Arg.BUSBW: r["bus_bandwidth"] / _GB if r["bus_bandwidth"] is not None else None}
        b.add_slice(tr, int(start[i]), int(dur[i]), str(r["operation"]), Cat.COLLECTIVE,
                    {k: v for k, v in args.items() if v is not None})
    return len(rows)


def add_bandwidth(b: TraceBuilder, tables: Tables, dev: DeviceProfile) -> dict[str, float]:
    """``HbmUsage`` and ``DmaUsage`` ``current_throughput`` (bytes/s) as counters ``neuron:<nc> HBM bandwidth``
    and ``neuron:<nc> DMA bandwidth`` (unit B/s; per physical core with LNC2); returns each track's peak B/s."""
    import pyarrow as pa

    peaks: dict[str, float] = {}
    for table, what in (("HbmUsage", "HBM bandwidth"), ("DmaUsage", "DMA bandwidth")):
        if not tables.need(what, table, ("timestamp", "current_throughput")):
            continue
        t = tables.table(table, {"timestamp": pa.int64(), "current_throughput": pa.float64(),
                                 "pcore_idx": pa.int64()})
        if t is None or not t.num_rows:
            continue
        ts = dev.clock.to_host(_np(t, "timestamp"))
        v, core = _np(t, "current_throughput", 0.0).astype(np.float64), _np(t, "pcore_idx")
        split = len(sorted_unique(core)) > 1
        for c in sorted_unique(core).tolist():
            m = np.flatnonzero(core == c)
            m = m[np.argsort(ts[m], kind="stable")]
            name = f"{_label(b, dev)}{f' pcore {c}' if split else ''} {what}"
            tr = b.track(dev.process, name, TrackKind.COUNTER, unit="B/s")
            b.c_ts.extend(ts[m].tolist())
            b.c_track.extend([tr] * len(m))
            b.c_value.extend(v[m].tolist())
            peaks[name] = float(v[m].max())
    return peaks


def add_errors(b: TraceBuilder, tables: Tables, dev: DeviceProfile) -> list[dict[str, Any]]:
    """Error rows as instants on ``neuron:<nc> errors``; returns them (host time, type, description, core)."""
    import pyarrow as pa

    if not tables.need("device errors", "Error", ("timestamp", "description")):
        return []
    s = pa.string()
    t = tables.table("Error", {"timestamp": pa.int64(), "type": s, "description": s, "error_type_id": pa.int64(),
                               "pcore_idx": pa.int64(), "metadata": s})
    if t is None or not t.num_rows:
        return []
    ts = dev.clock.to_host(_np(t, "timestamp"))
    tr = b.track(dev.process, f"{_label(b, dev)} errors", TrackKind.DEVICE, sort_index=5)
    out = []
    for i, r in enumerate(t.to_pylist()):
        args = {"type": r["type"], "description": r["description"], "error_type_id": r["error_type_id"],
                "logical_core": dev.nc, "pcore_idx": r["pcore_idx"], "metadata": r["metadata"]}
        args = {k: v for k, v in args.items() if v is not None}
        b.add_instant(tr, int(ts[i]), str(r["description"] or r["type"] or "device error"), CAT_ERROR, args)
        out.append({"ts_ns": int(ts[i]), **args})
    return out
