"""The emulated runtime's device profile, as the Neuron runtime and ``neuron-explorer view --output-format
parquet`` would leave it in a capture folder.

Sources: shared/design/neuron-explorer-facts.md ("Capture": ``<dir>/<instance-id>_pid_<pid>/<timestamp>/``
holding trace.json and the runtime's files; "Processing"; "Tables that matter", schema 7.4.0: field names,
types and units as documented, times in ns, ``flow_id`` a list of str-encoded ints, ``first_ts_ns`` a Unix-ns
string) and torch-neuronx-facts.md ("Corrections": ``framework_mapping_<ts>.json``, ``th_id`` a per-thread
counter, not the OS thread id).

``neuron-explorer`` does not exist here: `write_tables` stands in for it and writes the processed tables
directly into ``<timestamp>/parquet`` (where neuron-prof asks the CLI to write them). What it writes, per
device event the runtime recorded while the profiler ran (host issue time inside the cycle's trace.json):

* ``SystemProfileEvents``: the framework op that issued it (``framework``, the trace.json cpu_op holding the
  issue time, same name, start and thread), the runtime call (``neuron_rt``, ``nrt_execute``, for NEFF
  executions) and the hardware event on the core (``neuron_hw``: ``nc_exec_running`` for an execution;
  copies keep the emulator's own names ``copy_h2d``/``copy_d2h``/``<op> (copy to host)``, which the docs do
  not name), all three sharing one ``flow_id`` (the runtime's ``nrt_sequence_id``);
* ``ActiveTime``: merged busy intervals of the ``tensor`` engine (matrix ops) and the ``vector`` engine;
* ``CcOp``: the collectives, with bytes and bandwidths (bytes/s); ``SystemProfileHbmUsage``: device memory at
  the end of the cycle; ``SystemProfileMetadata`` (``hbm_capacity_bytes``) and ``Metadata`` (7.4.0).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson

SCHEMA_VERSION = "7.4.0"
INSTANCE_ID = "i-0emulated"
INSTANCE_TYPE = "trn2.48xlarge"
PROCESSED_DIR = "parquet"
_MATRIX = ("mm", "addmm", "bmm", "baddbmm", "_addmm_activation", "convolution", "_scaled_dot_product")
_CC_NAMES = {"allreduce": "AllReduce", "allgather": "AllGather", "_allgather_base": "AllGather",
             "reduce_scatter": "ReduceScatter", "_reduce_scatter_base": "ReduceScatter", "broadcast": "Broadcast",
             "alltoall": "AllToAll", "reduce": "Reduce", "gather": "Gather", "scatter": "Scatter",
             "barrier": "Barrier"}


HostOps = dict[int, tuple[np.ndarray, np.ndarray, list[str]]]
"""Thread id -> its cpu_ops' (start ns, end ns, names), sorted by start."""


def host_ops(trace_json: Path) -> HostOps:
    """trace.json's cpu_ops per thread id: (start ns, end ns, names), sorted by start. Read as Explorer reads
    the framework trace, through neuron-prof's Kineto reader (Kineto's JSON is not always valid JSON: names
    with quotes are written unescaped) keeping only cpu_op events."""
    from neuron_prof.loaders.kineto_json import load_kineto_json

    def cpu_ops(events: list[Any]) -> list[Any]:
        return [e for e in events if isinstance(e, dict) and e.get("cat") == "cpu_op" and e.get("ph") == "X"]

    tr = load_kineto_json(trace_json, transform=cpu_ops)
    sl = tr.slices
    tids = np.asarray([t.tid if isinstance(t.tid, int) else -1 for t in tr.tracks] or [-1], dtype=np.int64)
    tid = tids[np.asarray(sl.track, dtype=np.int64)] if len(sl) else np.zeros(0, dtype=np.int64)
    out = {}
    for t in np.unique(tid).tolist():
        rows = np.flatnonzero(tid == t)
        start, dur = sl.ts_ns[rows].astype(np.int64), sl.dur_ns[rows].astype(np.int64)
        o = np.lexsort((-dur, start))
        rows, start, dur = rows[o], start[o], dur[o]
        out[int(t)] = (start, start + dur, [tr.slice_name(int(r)) for r in rows])
    return out


def _issuer(ops: HostOps, tid: int, at: int) -> tuple[int, int, str] | None:
    """The innermost op (an ``ns::op`` cpu_op: dispatcher spans such as ``PythonSubclass`` are none) on thread
    `tid` running at `at`: (start, end, name)."""
    got = ops.get(tid)
    if got is None:
        return None
    start, end, names = got
    j = int(np.searchsorted(start, at, "right")) - 1
    while j >= 0:
        if end[j] >= at and "::" in names[j]:
            return int(start[j]), int(end[j]), names[j]
        j -= 1
    return None


def write_capture(folder: Path, act: dict[str, Any], memory: tuple[int, int, int], pid: int) -> int:
    """The framework mapping and the processed tables of `act` (an activity snapshot) for the capture folder
    holding trace.json; returns the device events written."""
    ops = host_ops(folder / "trace.json")
    if not ops:
        return 0
    first = min(int(s[0]) for s, _, _ in ops.values())
    last = max(int(e.max()) for _, e, _ in ops.values())
    host = np.asarray(act["host_ns"], dtype=np.int64)
    keep = np.flatnonzero((host >= first) & (host <= last))
    rows = _rows(act, keep, ops)
    _mapping(folder, act, keep)
    _tables(folder / PROCESSED_DIR, act, keep, rows, memory, pid, first, last)
    return len(keep)


def _mapping(folder: Path, act: dict[str, Any], keep: np.ndarray) -> None:
    """``framework_mapping_<ts>.json``: each runtime execution's issuing op (autograd seq_nr, the thread as a
    small per-thread counter like RecordFunction's, stream 0)."""
    th: dict[int, int] = {}
    data = []
    for i in keep.tolist():
        t = th.setdefault(int(act["th_id"][i]), len(th) + 1)
        data.append({"nrta_seq_id": int(act["nrt_sequence_id"][i]), "framework_op_exec_ids": [
            {"seq_nr": int(act["seq_nr"][i]), "th_id": t, "stream_id": int(act["stream_id"][i])}]})
    (folder / f"framework_mapping_{folder.name}.json").write_bytes(orjson.dumps({"version": 1, "data": data}))


def _rows(act: dict[str, Any], keep: np.ndarray, ops: HostOps) -> list[dict[str, Any]]:
    """SystemProfileEvents rows: framework op, runtime call, hardware event per device event kept."""
    kinds = act["kind_names"]
    out: list[dict[str, Any]] = []
    seen: dict[tuple[int, int, str], int] = {}  # one framework row per issuing op, whatever it issued
    for i in keep.tolist():
        kind = kinds[int(act["kind"][i])]
        if kind == "collective":
            continue  # CcOp
        dev, tid, flow = int(act["device"][i]), int(act["th_id"][i]), str(int(act["nrt_sequence_id"][i]))
        start, end = int(act["start_ns"][i]), int(act["end_ns"][i])
        op = _issuer(ops, tid, int(act["host_ns"][i]))
        if op is not None:
            k = seen.get((tid, op[0], op[2]))
            if k is None:
                seen[(tid, op[0], op[2])] = len(out)
                out.append(_event(op[2], op[0], op[1], "framework", tid, -1, [flow]))
            else:
                out[k]["flow"].append(flow)
        link = [flow] if op is not None else None
        if kind in ("op", "graph"):
            out.append(_event("nrt_execute", start, end, "neuron_rt", tid, dev, link))
            out.append(_event("nc_exec_running", start, end, "neuron_hw", tid, dev, link))
        else:  # a copy: undocumented in Explorer, the emulator's own name
            out.append(_event(str(act["name"][i]), start, end, "neuron_hw", tid, dev, link))
    return out


def _event(name: str, start: int, end: int, src: str, tid: int, core: int, flow: list[str] | None
           ) -> dict[str, Any]:
    return {"name": name, "start": start, "end": end, "src": src, "tid": tid, "nc": core, "pcore": core,
            "flow": flow}


def _merged(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, z in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], z)
        else:
            out.append([a, z])
    return [(a, z) for a, z in out]


def _tables(out: Path, act: dict[str, Any], keep: np.ndarray, rows: list[dict[str, Any]],
            memory: tuple[int, int, int], pid: int, first: int, last: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    i64, s = pa.int64(), pa.string()

    def write(name: str, cols: dict[str, tuple[list[Any], Any]]) -> None:
        pq.write_table(pa.table({k: pa.array(v, type=t) for k, (v, t) in cols.items()}), out / f"{name}.parquet")

    kinds = act["kind_names"]
    hw_end = max([r["end"] for r in rows] + [last])
    write("Metadata", {"profile_schema_version": ([SCHEMA_VERSION], s), "instance_type": ([INSTANCE_TYPE], s),
                       "runtime_version": (["emulated"], s), "compiler_version": (["emulated"], s),
                       "driver_version": (["emulated"], s), "neuroncore_idx": ([0], i64),
                       "neuron_device_idx": ([0], i64), "first_hw_timestamp": ([first], i64),
                       "last_hw_timestamp": ([hw_end], i64), "is_simulation": ([True], pa.bool_())})
    write("SystemProfileMetadata", {"first_ts_ns": ([str(first)], s), "last_ts_ns": ([str(hw_end)], s),
                                    "ntff_version": ([0], i64), "hbm_capacity_bytes": ([memory[2]], i64)})
    n = len(rows)
    write("SystemProfileEvents", {
        "id": (list(range(n)), i64), "name": ([r["name"] for r in rows], s),
        "start_ts": ([r["start"] for r in rows], i64), "end_ts": ([r["end"] for r in rows], i64),
        "duration_ns": ([r["end"] - r["start"] for r in rows], i64),
        "trace_event_source": ([r["src"] for r in rows], s), "instance_id": ([INSTANCE_ID] * n, s),
        "process_id": ([pid] * n, i64), "thread_id": ([r["tid"] for r in rows], i64),
        "nc_idx": ([r["nc"] for r in rows], i64), "pcore_idx": ([r["pcore"] for r in rows], i64),
        "worker_gid": ([0] * n, i64), "flow_id": ([r["flow"] for r in rows], pa.list_(s)),
        "framework_stream_id": ([None] * n, s), "extra_attributes_json": (["{}"] * n, s)})
    busy: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for i in keep.tolist():
        if kinds[int(act["kind"][i])] not in ("op", "graph"):
            continue
        base = str(act["name"][i]).split("::")[-1]
        eng = "tensor" if base.startswith(_MATRIX) else "vector"
        busy.setdefault((int(act["device"][i]), eng), []).append((int(act["start_ns"][i]), int(act["end_ns"][i])))
    act_rows = [(c, e, a, z) for (c, e), iv in sorted(busy.items()) for a, z in _merged(iv)]
    write("ActiveTime", {"start_ts": ([r[2] for r in act_rows], i64), "end_ts": ([r[3] for r in act_rows], i64),
                         "duration_ns": ([r[3] - r[2] for r in act_rows], i64),
                         "engine": ([r[1] for r in act_rows], s), "pcore_idx": ([r[0] for r in act_rows], i64)})
    _cc_table(write, act, keep, pa)
    write("SystemProfileHbmUsage", {"timestamp": ([hw_end], i64), "total_bytes": ([memory[1]], i64),
                                    "tensors_bytes": ([memory[0]], i64), "device_idx": ([0], i64),
                                    "hbm_idx": ([0], i64), "instance_id": ([INSTANCE_ID], s)})


def _cc_table(write: Any, act: dict[str, Any], keep: np.ndarray, pa: Any) -> None:
    """CcOp: one row per collective; bandwidths in bytes/s (algbw = bytes / time, busbw as nccl-tests)."""
    i64, s, f64 = pa.int64(), pa.string(), pa.float64()
    cc_info = act.get("cc") or {}
    kinds = act["kind_names"]
    rows = []
    for i in keep.tolist():
        if kinds[int(act["kind"][i])] != "collective":
            continue
        seq = int(act["nrt_sequence_id"][i])
        nbytes, ranks = cc_info.get(seq, (0, 1))
        a, z = int(act["start_ns"][i]), int(act["end_ns"][i])
        op = _CC_NAMES.get(str(act["name"][i]), str(act["name"][i]))
        algbw = nbytes / ((z - a) / 1e9) if z > a else 0.0
        factor = (2.0 if op == "AllReduce" else 1.0) * (ranks - 1) / ranks
        rows.append((a, z, op, nbytes, algbw, algbw * factor, ranks, seq))
    write("CcOp", {"start_ts": ([r[0] for r in rows], i64), "end_ts": ([r[1] for r in rows], i64),
                   "duration_ns": ([r[1] - r[0] for r in rows], i64), "operation": ([r[2] for r in rows], s),
                   "algorithm": (["Ring"] * len(rows), s), "num_elements": ([None] * len(rows), i64),
                   "dtype": ([None] * len(rows), s), "op_id": ([r[7] for r in rows], i64),
                   "stream_id": ([0] * len(rows), i64), "stream_index": (list(range(len(rows))), i64),
                   "trigger_engine": (["sync"] * len(rows), s), "input_size": ([r[3] for r in rows], i64),
                   "output_size": ([r[3] for r in rows], i64), "algorithm_bandwidth": ([r[4] for r in rows], f64),
                   "bus_bandwidth": ([r[5] for r in rows], f64), "trigger_start_ts": ([r[0] for r in rows], i64),
                   "cc_trigger_start_delay": ([0] * len(rows), i64), "replica_group_id": ([0] * len(rows), i64),
                   "replica_group": ([",".join(map(str, range(r[6]))) for r in rows], s)})
