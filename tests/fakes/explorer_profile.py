"""Neuron Explorer profile folders written to the documented schema (shared/design/neuron-explorer-facts.md,
schema 7.4.0): field names, types and units as documented (i64 unless noted, times in ns, bandwidths in
bytes/s, ``flow_id`` a list of str-encoded ints, ``first_ts_ns`` a Unix-ns string), big tables split into
``Name_0.parquet``, ``Name_1.parquet``. No real Explorer output is public: this is the schema, not a sample.

`write_profile` returns `Written`: the values the tests compare the loaded trace against.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

T0 = 1_764_000_000_000_000_000
"""Profile start, Unix ns."""
PID, TID, STREAM = 4242, 7, "3"
HBM_CAPACITY = 24 * 1024**3


@dataclass
class Written:
    """What a fixture wrote, for the assertions."""

    busy_ns: dict[str, int] = field(default_factory=dict)  # "<pcore>:<engine>" -> merged busy ns
    links: list[tuple[str, str]] = field(default_factory=list)  # (framework op name, runtime event name)
    executions: list[tuple[str, str]] = field(default_factory=list)  # (runtime event, hardware one inside)
    collectives: list[dict[str, Any]] = field(default_factory=list)
    hbm_total: list[tuple[int, int]] = field(default_factory=list)  # (ts, total_bytes) of device 0, HBM 0
    instructions: dict[str, tuple[int, int]] = field(default_factory=dict)  # engine -> (count, ns)
    summary: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _write(folder: Path, name: str, cols: dict[str, tuple[list[Any], Any]], parts: int = 1,
           extra: bool = False) -> None:
    """Table `name` from {field: (values, pyarrow type)}; split into `parts` files ``name_<i>.parquet``."""
    t = pa.table({k: pa.array(v, type=typ) for k, (v, typ) in cols.items()})
    if extra:  # a column a later schema added: readers must ignore it
        t = t.append_column("added_in_7_9", pa.array(["x"] * t.num_rows, type=pa.string()))
    if parts == 1:
        pq.write_table(t, folder / f"{name}.parquet")
        return
    step = -(-t.num_rows // parts)
    for i in range(parts):
        pq.write_table(t.slice(i * step, step), folder / f"{name}_{i}.parquet")


def write_profile(folder: Path, version: str = "7.4.0", extra_columns: bool = False,
                  ops: list[tuple[str, int, int]] | None = None, pid: int = PID, t0: int = T0) -> Written:
    """A processed profile of one process: 3 dispatched ops run on core 0, engines busy, 3 collectives.

    `ops`: the framework events as (name, start ns, thread id), e.g. ops of a real trace.json the profile
    belongs to (default: ``aten::mm#k`` at `t0` + 1 ms + k * 2 ms on thread TID); each is dispatched to one
    runtime execution (flow id 100 + k) 150 µs after it starts. `t0`: the profile's start (Unix ns)."""
    folder.mkdir(parents=True, exist_ok=True)
    w = Written()
    if ops is None:
        ops = [(f"aten::mm#{k}", t0 + 1_000_000 + k * 2_000_000, TID) for k in range(3)]
    t_end = max(t0 + 10_000_000, max(t for _, t, _ in ops) + 1_500_000)  # the last runtime event's end
    i64, s, f64 = pa.int64(), pa.string(), pa.float64()
    _write(folder, "Warning", {"message": (["dropped 12 events: ring buffer full on nc 0"], s),
                               "category": (["data_loss"], s)})
    w.warnings = ["Neuron Explorer [data_loss]: dropped 12 events: ring buffer full on nc 0"]
    _write(folder, "Metadata", {
        "profile_schema_version": ([version], s), "instance_type": (["trn2.48xlarge"], s),
        "runtime_version": (["2.31.0"], s), "compiler_version": (["2.31.1"], s), "driver_version": (["2.25"], s),
        "neuroncore_idx": ([0], i64), "neuron_device_idx": ([0], i64), "first_hw_timestamp": ([t0], i64),
        "last_hw_timestamp": ([t_end], i64), "is_simulation": ([False], pa.bool_())}, extra=extra_columns)
    _write(folder, "SystemProfileMetadata", {
        "first_ts_ns": ([str(t0)], s), "last_ts_ns": ([str(t_end)], s), "ntff_version": ([3], i64),
        "hbm_capacity_bytes": ([HBM_CAPACITY], i64)})
    rows: list[dict[str, Any]] = []
    for k, (op, t, tid) in enumerate(ops):  # framework dispatch → runtime execute (flow k) → hardware execution
        rows.append(dict(name=op, start_ts=t, end_ts=t + 200_000, src="framework", nc=-1, pcore=-1,
                         flow=[str(100 + k)], stream=None, tid=tid))
        rows.append(dict(name="nrt_execute", start_ts=t + 150_000, end_ts=t + 1_500_000, src="neuron_rt", nc=0,
                         pcore=0, flow=[str(100 + k)], stream=STREAM, tid=tid))
        rows.append(dict(name="nc_exec_running", start_ts=t + 300_000, end_ts=t + 1_400_000, src="neuron_hw",
                         nc=0, pcore=0, flow=None, stream=None, tid=tid))
        w.links.append((op, "nrt_execute"))
        w.executions.append(("nrt_execute", "nc_exec_running"))
    rows.append(dict(name="neuron::copy_h2d", start_ts=t0 + 500_000, end_ts=t0 + 600_000, src="framework", nc=-1,
                     pcore=-1, flow=None, stream=STREAM, tid=TID))  # a privateuse1_driver event: by stream
    _write(folder, "SystemProfileEvents", {
        "id": (list(range(len(rows))), i64), "name": ([r["name"] for r in rows], s),
        "start_ts": ([r["start_ts"] for r in rows], i64), "end_ts": ([r["end_ts"] for r in rows], i64),
        "duration_ns": ([r["end_ts"] - r["start_ts"] for r in rows], i64),
        "trace_event_source": ([r["src"] for r in rows], s), "instance_id": (["i-0abc"] * len(rows), s),
        "process_id": ([pid] * len(rows), i64), "thread_id": ([r["tid"] for r in rows], i64),
        "nc_idx": ([r["nc"] for r in rows], i64), "pcore_idx": ([r["pcore"] for r in rows], i64),
        "worker_gid": ([0] * len(rows), i64), "flow_id": ([r["flow"] for r in rows], pa.list_(s)),
        "framework_stream_id": ([r["stream"] for r in rows], s),
        "extra_attributes_json": (["{}"] * len(rows), s)}, parts=2, extra=extra_columns)
    act = [("tensor", t0 + 1_300_000, 400_000), ("tensor", t0 + 3_300_000, 500_000),
           ("tensor", t0 + 5_300_000, 600_000), ("vector", t0 + 1_800_000, 100_000),
           ("vector", t0 + 3_800_000, 250_000)]
    for e, _, d in act:
        w.busy_ns[f"0:{e}"] = w.busy_ns.get(f"0:{e}", 0) + d
    _write(folder, "ActiveTime", {
        "start_ts": ([a for _, a, _ in act], i64), "end_ts": ([a + d for _, a, d in act], i64),
        "duration_ns": ([d for _, _, d in act], i64), "engine": ([e for e, _, _ in act], s),
        "pcore_idx": ([0] * len(act), i64)}, parts=2)
    # (operation, algorithm, input bytes, output bytes, duration ns, ranks): algbw = output / time (AllGather)
    # or input / time (AllReduce); busbw = algbw * (n-1)/n, resp. 2(n-1)/n (nccl-tests' definitions)
    cc = [("AllGather", "Ring", 16 << 20, 64 << 20, 500_000, 4), ("AllGather", "Ring", 16 << 20, 64 << 20, 640_000, 4),
          ("AllReduce", "Mesh", 32 << 20, 32 << 20, 400_000, 8)]
    for j, (op, alg, nin, nout, d, n) in enumerate(cc):
        algbw = (nout if op == "AllGather" else nin) / (d / 1e9)
        busbw = algbw * (n - 1) / n * (2 if op == "AllReduce" else 1)
        w.collectives.append(dict(operation=op, algorithm=alg, input_size=nin, output_size=nout, algbw=algbw,
                                  busbw=busbw, replica_group=",".join(map(str, range(n))),
                                  start_ts=t0 + 7_000_000 + j * 700_000, duration_ns=d))
    _write(folder, "CcOp", {
        "start_ts": ([c["start_ts"] for c in w.collectives], i64),
        "end_ts": ([c["start_ts"] + c["duration_ns"] for c in w.collectives], i64),
        "duration_ns": ([c["duration_ns"] for c in w.collectives], i64),
        "operation": ([c["operation"] for c in w.collectives], s),
        "algorithm": ([c["algorithm"] for c in w.collectives], s),
        "num_elements": ([c["input_size"] // 4 for c in w.collectives], i64),
        "dtype": (["float32"] * 3, s), "op_id": ([1, 2, 3], i64), "stream_id": ([0, 0, 0], i64),
        "stream_index": ([0, 1, 2], i64), "trigger_engine": (["sync"] * 3, s),
        "input_size": ([c["input_size"] for c in w.collectives], i64),
        "output_size": ([c["output_size"] for c in w.collectives], i64),
        "algorithm_bandwidth": ([c["algbw"] for c in w.collectives], f64),
        "bus_bandwidth": ([c["busbw"] for c in w.collectives], f64),
        "trigger_start_ts": ([c["start_ts"] - 10_000 for c in w.collectives], i64),
        "cc_trigger_start_delay": ([10_000] * 3, i64), "replica_group_id": ([0, 0, 1], i64),
        "replica_group": ([c["replica_group"] for c in w.collectives], s)}, extra=extra_columns)
    hbm_ts = [t0 + k * 2_500_000 for k in range(4)]
    tensors = [1 << 30, 3 << 30, 5 << 30, 2 << 30]
    weights = [4 << 30] * 4
    w.hbm_total = [(t, a + b) for t, a, b in zip(hbm_ts, tensors, weights)]
    _write(folder, "SystemProfileHbmUsage", {
        "timestamp": (hbm_ts, i64), "total_bytes": ([a + b for a, b in zip(tensors, weights)], i64),
        "tensors_bytes": (tensors, i64), "weights_bytes": (weights, i64), "collectives_bytes": ([0] * 4, i64),
        "profiler_buffers_bytes": ([0] * 4, i64), "device_idx": ([0] * 4, i64), "hbm_idx": ([0] * 4, i64),
        "instance_id": (["i-0abc"] * 4, s)})
    w.summary = {"total_time": 0.01, "mfu_estimated_percent": 41.5, "mbu_estimated_percent": 63.0,
                 "tensor_active_time_percent": 15.0, "vector_active_time_percent": 3.5}
    _write(folder, "Summary", {k: ([v], f64) for k, v in w.summary.items()}, extra=extra_columns)
    _write(folder, "ExecutionInfo", {
        "execution_index": ([0, 1, 2], pa.int32()), "neff_name": (["mm.neff"] * 3, s),
        "execution_start_ts": ([1_300_000, 3_300_000, 5_300_000], i64),
        "execution_end_ts": ([2_400_000, 4_400_000, 6_400_000], i64), "num_subgraphs": ([1, 1, 1], i64),
        "row_count": ([10, 10, 10], i64)})
    n = 3000
    engines = ["tensor", "vector", "scalar"]
    eng = [engines[i % 3] for i in range(n)]
    dur = [100 + i % 7 for i in range(n)]
    for e, d in zip(eng, dur):
        c, ns = w.instructions.get(e, (0, 0))
        w.instructions[e] = (c + 1, ns + d)
    _write(folder, "Instruction", {
        "start_ts": ([t0 + i for i in range(n)], i64), "end_ts": ([t0 + i + d for i, d in enumerate(dur)], i64),
        "duration_ns": (dur, i64), "engine": (eng, s),
        "opcode": (["MATMUL" if e == "tensor" else "ACT" for e in eng], s),
        "hlo_name": ([f"dot.{i}" for i in range(n)], s)}, parts=3)
    return w
