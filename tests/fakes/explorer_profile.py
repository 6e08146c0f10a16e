"""Processed Neuron Explorer profile folders written to the documents (shared/design/neuron-explorer-facts.md,
neuron-explorer-schema-7.4.0.txt through `explorer_schema`, and aws-neuron-sdk's glossary): a system profile on
the HOST clock (Unix ns) and a device profile of logical core 0 on the DEVICE clock, which may be hours apart
from the host's and drift against it. ``ExecutionInfo`` times are relative to ``Metadata.first_hw_timestamp``;
every device row lies inside one execution; each execution is one ``nc_exec_running`` of the system profile.
No real Explorer output is public: this is the schema, not a sample.

`write_profile` returns `Written`: what the tests compare the loaded trace against, in HOST ns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fakes.explorer_schema import Schema, documented, write_schema_fields, write_table

T0 = 1_764_000_000_000_000_000
"""Profile start, Unix ns (host clock)."""
DEVICE_T0 = 3 * 3600 * 1_000_000_000 + 123_456
"""The device clock at T0: a counter 3 h since the device started (not Unix time)."""
PID, TID, STREAM = 4242, 7, "3"
HBM_CAPACITY = 24 * 1024**3
USER_FILE = "/home/user/train.py"


@dataclass
class Written:
    """What a fixture wrote, in host ns, for the assertions."""

    busy_ns: dict[str, int] = field(default_factory=dict)  # "<nc>:<engine>" -> merged busy ns
    busy: list[tuple[str, int, int]] = field(default_factory=list)  # (engine, host start, host duration)
    links: list[tuple[str, str]] = field(default_factory=list)  # (framework op name, runtime event name)
    executions: list[tuple[str, str]] = field(default_factory=list)  # (runtime event, hardware one inside)
    exec_host: list[tuple[int, int]] = field(default_factory=list)  # nc_exec_running (start, end), host ns
    collectives: list[dict[str, Any]] = field(default_factory=list)
    hbm_total: list[tuple[int, int]] = field(default_factory=list)  # (ts, total_bytes) of device 0, HBM 0
    hbm_bandwidth: list[tuple[int, float]] = field(default_factory=list)  # (host ts, B/s)
    errors: list[dict[str, Any]] = field(default_factory=list)
    instructions: dict[str, tuple[int, int]] = field(default_factory=dict)  # engine -> (count, ns)
    framework_ns: dict[str, int] = field(default_factory=dict)  # framework_name -> instruction ns
    line_ns: dict[str, int] = field(default_factory=dict)  # "path:LINE" -> instruction ns
    op_ns: dict[str, int] = field(default_factory=dict)  # host op name -> instruction ns of its executions
    summary: dict[str, float] = field(default_factory=dict)
    opcodes: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    neffs: dict[str, dict[str, int]] = field(default_factory=dict)


def write_profile(folder: Path, version: str = "7.4.0", ops: list[tuple[str, int, int]] | None = None,
                  pid: int = PID, t0: int = T0, device_t0: int = DEVICE_T0, drift: float = 0.0,
                  schema: Schema | None = None, schema_fields: bool = True, instance: str = "i-0abc",
                  device: bool = True, window: tuple[int, int] | None = None, pcores: int = 1,
                  framework: bool = True, system: bool = True) -> Written:
    """A processed profile of one process: dispatched ops each run as one execution on logical core 0, the
    last one holding 3 collectives; engines busy inside the executions; copies; a hardware error.

    `ops`: the framework events (name, host start ns, thread id), e.g. ops of a real trace.json (default:
    ``aten::mm#k`` at `t0` + 1 ms + k * 2 ms on thread TID); each dispatches one runtime call (flow id 100 + k)
    150 µs after it starts (or after the previous call: one core runs one at a time), running the execution
    from 150 µs into the call. Device times: ``device_t0 + (host - t0) * (1 +
    drift)``. `schema`: the layout to write (default: the documented 7.4.0); `schema_fields`: write SchemaFields.
    `device`: write the device profile's tables (else a system profile alone). `window`: the device profile
    covers only executions [lo, hi) (a profile started after warm-up). `pcores`: 2 for an LNC2 logical core
    (its two physical cores each busy the same way). `framework`: False for a system profile processed
    without its framework trace (no ``framework`` rows: the runtime calls keep their flow ids alone). `system`:
    False for ``--ignore-system-profile`` ("Skip system profiles (device-only view)", how-to-profile-workload.rst):
    none of the system profile's tables (``SystemProfile*``, ``CpuUsage``, ``HostMemUsage``)."""
    sch = schema if schema is not None else documented()
    w = Written()
    dev = lambda h: device_t0 + round((h - t0) * (1 + drift))  # noqa: E731  host ns -> device clock
    strict = schema is None  # the documented schema: every field written must be in it
    put = lambda table, cols, parts=1: (write_table(folder, sch, table, cols, parts, strict=strict)  # noqa: E731
                                        if table in sch else None)
    if ops is None:
        ops = [(f"aten::mm#{k}", t0 + 1_000_000 + k * 2_000_000, TID) for k in range(3)]
    last = len(ops) - 1
    execs = []  # host (start, end) of each execution, the last one long enough for the collectives
    calls = []  # host (start, end) of the runtime call running each: one after the other, as one core runs them
    for k, (_, t, _) in enumerate(ops):  # durations differ (1.1 ms + k * 37 µs): a window is recognisable
        r = max(t + 150_000, calls[-1][1] + 10_000) if calls else t + 150_000
        a = r + 150_000
        z = a + (2_100_000 if k == last else 1_100_000 + 37_000 * (k % 5))
        execs.append((a, z))
        calls.append((r, z + 100_000))
    w.exec_host = execs
    t_end = max(t0 + 10_000_000, execs[-1][1] + 500_000)
    if schema_fields:
        write_schema_fields(folder, sch)
    put("Warning", {"message": ["dropped 12 events: ring buffer full on nc 0"], "category": ["data_loss"]})
    w.warnings = ["Neuron Explorer [data_loss]: dropped 12 events: ring buffer full on nc 0"]
    if system:
        put("SystemProfileMetadata", {"first_ts": ["2025-11-24 16:00:00 +0000 UTC"], "last_ts": [""],
                                      "first_ts_ns": [str(t0)], "last_ts_ns": [str(t_end)], "ntff_version": [3],
                                      "hbm_capacity_bytes": [HBM_CAPACITY]})
        _system_events(put, w, ops, execs, calls, pid, instance, framework)
        _system_samples(put, w, t0, instance)
    if not device:
        put("Metadata", {"profile_schema_version": [version], "instance_type": ["trn2.48xlarge"]})
        return w
    lo, hi = window or (0, len(execs))
    d_ops, d_execs = ops[lo:hi], execs[lo:hi]
    d0 = d_execs[0][0] - 100_000  # the device profile starts just before its first execution
    put("Metadata", {"profile_schema_version": [version], "instance_type": ["trn2.48xlarge"],
                     "runtime_version": ["2.31.0"], "compiler_version": ["2.31.1"], "driver_version": ["2.25"],
                     "neuroncore_idx": [0], "neuron_device_idx": [0], "first_hw_timestamp": [dev(d0)],
                     "last_hw_timestamp": [dev(d_execs[-1][1])], "first_ts": ["1970-01-01 00:00:00+00:00"],
                     "is_simulation": [False], "num_physical_cores": [pcores], "ticks_per_nanosec": [1]})
    put("DeviceProfileList", {"device_profile_name": ["profile_nc_0_session_1"], "instance_id": [instance],
                              "process_id": [pid], "nc_id": [0], "session_id": [1]})
    neff = ["mm.neff"] * (len(d_execs) - 1) + ["allreduce.neff"]
    put("ExecutionInfo", {"execution_index": list(range(len(d_execs))), "neff_name": neff,
                          "execution_start_ts": [dev(a) - dev(d0) for a, _ in d_execs],
                          "execution_end_ts": [dev(z) - dev(d0) for _, z in d_execs],
                          "num_subgraphs": [1] * len(d_execs), "row_count": [10] * len(d_execs)})
    for name, (a, z) in zip(neff, d_execs):
        n = w.neffs.setdefault(name, {"executions": 0, "time_ns": 0})
        n["executions"] += 1
        n["time_ns"] += dev(z) - dev(a)
    _device_tables(put, w, d_ops, d_execs, dev, pcores)
    return w


def _system_events(put: Any, w: Written, ops: list[tuple[str, int, int]], execs: list[tuple[int, int]],
                   calls: list[tuple[int, int]], pid: int, instance: str, framework: bool = True) -> None:
    rows: list[dict[str, Any]] = []
    for k, ((op, t, tid), (a, z), (r0, r1)) in enumerate(zip(ops, execs, calls)):  # framework → runtime → hw
        rows.append(dict(name=op, start_ts=t, end_ts=t + 200_000, src="framework", nc=None, pcore=None,
                         flow=[str(100 + k)], stream=None, tid=tid))
        rows.append(dict(name="nrt_execute", start_ts=r0, end_ts=r1, src="neuron_rt", nc=0,
                         pcore=None, flow=[str(100 + k)], stream=STREAM, tid=tid))
        rows.append(dict(name="nc_exec_running", start_ts=a, end_ts=z, src="neuron_hw", nc=0, pcore=0, flow=None,
                         stream=None, tid=tid))
        w.links.append((op, "nrt_execute"))
        w.executions.append(("nrt_execute", "nc_exec_running"))
    t0 = ops[0][1] - 1_000_000
    # a privateuse1_driver event (by stream) copying to the device: the runtime's dmem_buf_copyin, same flow id
    rows.append(dict(name="neuron::copy_h2d", start_ts=t0 + 500_000, end_ts=t0 + 600_000, src="framework",
                     nc=None, pcore=None, flow=["99"], stream=STREAM, tid=TID))
    rows.append(dict(name="dmem_buf_copyin", start_ts=t0 + 520_000, end_ts=t0 + 580_000, src="neuron_rt", nc=0,
                     pcore=None, flow=["99"], stream=None, tid=TID))
    w.links.append(("neuron::copy_h2d", "dmem_buf_copyin"))
    # the last mm's result read back (device to host) under its flow id
    k = min(2, len(ops) - 1)
    rows.append(dict(name="dmem_buf_copyout", start_ts=execs[k][1] + 20_000, end_ts=execs[k][1] + 60_000,
                     src="neuron_rt", nc=0, pcore=None, flow=[str(100 + k)], stream=None, tid=ops[k][2]))
    w.links.append((ops[k][0], "dmem_buf_copyout"))
    if not framework:
        rows = [r for r in rows if r["src"] != "framework"]
        w.links = []
    put("SystemProfileEvents", {
        "id": list(range(len(rows))), "name": [r["name"] for r in rows],
        "start_ts": [r["start_ts"] for r in rows], "end_ts": [r["end_ts"] for r in rows],
        "duration_ns": [r["end_ts"] - r["start_ts"] for r in rows],
        "trace_event_source": [r["src"] for r in rows], "instance_id": [instance] * len(rows),
        "process_id": [pid] * len(rows), "thread_id": [r["tid"] for r in rows],
        "nc_idx": [r["nc"] for r in rows], "pcore_idx": [r["pcore"] for r in rows],
        "worker_gid": [0] * len(rows), "flow_id": [r["flow"] for r in rows],
        "framework_stream_id": [r["stream"] for r in rows], "extra_attributes_json": ["{}"] * len(rows)}, parts=2)


def _system_samples(put: Any, w: Written, t0: int, instance: str) -> None:
    hbm_ts = [t0 + k * 2_500_000 for k in range(4)]
    tensors, weights = [1 << 30, 3 << 30, 5 << 30, 2 << 30], [4 << 30] * 4
    w.hbm_total = [(t, a + b) for t, a, b in zip(hbm_ts, tensors, weights)]
    put("SystemProfileHbmUsage", {"timestamp": hbm_ts, "total_bytes": [a + b for a, b in zip(tensors, weights)],
                                  "tensors_bytes": tensors, "weights_bytes": weights, "device_idx": [0] * 4,
                                  "hbm_idx": [0] * 4, "instance_id": [instance] * 4})
    put("CpuUsage", {"timestamp": hbm_ts * 2, "util_percent": [10.0, 50.0, 90.0, 20.0, 5.0, 5.0, 7.5, 5.0],
                     "cpu_id": ["0"] * 4 + ["1"] * 4, "instance_id": [instance] * 8})
    put("HostMemUsage", {"timestamp": hbm_ts, "used_bytes": [8 << 30, 9 << 30, 12 << 30, 9 << 30],
                         "used_percent": [12.5, 14.0, 18.75, 14.0], "instance_id": [instance] * 4})


def _device_tables(put: Any, w: Written, ops: list[tuple[str, int, int]], execs: list[tuple[int, int]],
                   dev: Any, pcores: int = 1) -> None:
    """ActiveTime, CcOp, HbmUsage, DmaUsage, Error, Instruction, FrameworkInstruction, StackFrame*, Summary,
    OpcodeSummary: device clock, each row inside an execution."""
    last = len(execs) - 1
    mm = execs[:last] or execs[:1]
    act = [("tensor", a, 400_000 + 100_000 * k) for k, (a, _) in enumerate(mm)]
    act += [("vector", mm[k][0] + 500_000, d) for k, d in ((0, 100_000), (1, 250_000)) if k < len(mm)]
    for p in range(pcores):
        for e, a, d in act:
            key = f"0.{p}:{e}" if pcores > 1 else f"0:{e}"
            w.busy_ns[key] = w.busy_ns.get(key, 0) + d
            w.busy.append((e, a, d))
    act_p = [(e, a, d, p) for p in range(pcores) for e, a, d in act]
    put("ActiveTime", {"start_ts": [dev(a) for _, a, _, _ in act_p], "end_ts": [dev(a + d) for _, a, d, _ in act_p],
                       "duration_ns": [dev(a + d) - dev(a) for _, a, d, _ in act_p],
                       "engine": [e for e, _, _, _ in act_p], "pcore_idx": [p for *_, p in act_p]}, parts=2)
    # (operation, algorithm, input bytes, output bytes, duration ns, ranks) inside the last execution:
    # algbw = output / time (AllGather) or input / time (AllReduce); busbw = algbw * (n-1)/n, resp. 2(n-1)/n
    cc = [("AllGather", "Ring", 16 << 20, 64 << 20, 500_000, 4), ("AllGather", "Ring", 16 << 20, 64 << 20, 640_000, 4),
          ("AllReduce", "Mesh", 32 << 20, 32 << 20, 400_000, 8)]
    for j, (op, alg, nin, nout, d, n) in enumerate(cc):
        algbw = (nout if op == "AllGather" else nin) / (d / 1e9)
        busbw = algbw * (n - 1) / n * (2 if op == "AllReduce" else 1)
        w.collectives.append(dict(operation=op, algorithm=alg, input_size=nin, output_size=nout, algbw=algbw,
                                  busbw=busbw, replica_group=",".join(map(str, range(n))),
                                  start_ts=execs[last][0] + 50_000 + j * 700_000, duration_ns=d))
    if execs[last][1] - execs[last][0] < 2_000_000:  # a window without the collectives' execution
        w.collectives = []
    c = w.collectives
    put("CcOp", {"start_ts": [dev(x["start_ts"]) for x in c],
                 "end_ts": [dev(x["start_ts"] + x["duration_ns"]) for x in c],
                 "duration_ns": [dev(x["start_ts"] + x["duration_ns"]) - dev(x["start_ts"]) for x in c],
                 "operation": [x["operation"] for x in c], "algorithm": [x["algorithm"] for x in c],
                 "num_elements": [x["input_size"] // 4 for x in c], "dtype": ["float32"] * len(c),
                 "op_id": list(range(1, len(c) + 1)), "stream_id": [0] * len(c), "stream_index": list(range(len(c))),
                 "trigger_engine": ["sync"] * len(c),
                 "input_size": [x["input_size"] for x in c], "output_size": [x["output_size"] for x in c],
                 "algorithm_bandwidth": [x["algbw"] for x in c], "bus_bandwidth": [x["busbw"] for x in c],
                 "trigger_start_ts": [dev(x["start_ts"] - 10_000) for x in c],
                 "cc_trigger_start_delay": [10_000] * len(c), "replica_group_id": [0, 0, 1][: len(c)],
                 "replica_group": [x["replica_group"] for x in c]})
    bw = [(a + 100_000, 2.5e11 + 1e10 * k) for k, (a, _) in enumerate(execs)]
    w.hbm_bandwidth = bw
    put("HbmUsage", {"timestamp": [dev(t) for t, _ in bw], "current_throughput": [v for _, v in bw],
                     "total_transfer_bytes": [int(v * 1e-4) for _, v in bw], "pcore_idx": [0] * len(bw)})
    put("DmaUsage", {"timestamp": [dev(t) for t, _ in bw], "current_throughput": [v / 2 for _, v in bw],
                     "total_transfer_bytes": [int(v * 5e-5) for _, v in bw], "pcore_idx": [0] * len(bw)})
    err_t = mm[-1][0] + 200_000
    w.errors = [dict(ts_ns=err_t, type="Errors", description="EMBD OOB", pcore_idx=0)]
    put("Error", {"description": ["EMBD OOB"], "error_type_id": [1], "pcore_idx": [0], "timestamp": [dev(err_t)],
                  "type": ["Errors"]})
    _instructions(put, w, ops, mm, dev)


def _instructions(put: Any, w: Written, ops: list[tuple[str, int, int]], mm: list[tuple[int, int]],
                  dev: Any) -> None:
    n = 3000
    engines = ["tensor", "vector", "scalar"]
    rows: dict[str, list[Any]] = {k: [] for k in ("start_ts", "end_ts", "duration_ns", "engine", "opcode",
                                                   "hlo_name", "raw_framework_id", "stack_frame_ids")}
    names = {10 + k: f"MLP[0]/Linear[{k}]/aten.mm" for k in range(len(mm))}
    frames = {"[1]": f"{USER_FILE}:12", "[2]": f"{USER_FILE}:20"}
    for i in range(n):
        k = i % len(mm)
        e = engines[i % 3]
        a = dev(mm[k][0]) + (i // len(mm)) * 300
        d = 100 + i % 7
        sf = "[1]" if k == 0 else "[2]"
        for key, v in (("start_ts", a), ("end_ts", a + d), ("duration_ns", d), ("engine", e),
                       ("opcode", "MATMUL" if e == "tensor" else "ACT"), ("hlo_name", f"dot.{i}"),
                       ("raw_framework_id", 10 + k), ("stack_frame_ids", sf)):
            rows[key].append(v)
        cnt, ns = w.instructions.get(e, (0, 0))
        w.instructions[e] = (cnt + 1, ns + d)
        w.framework_ns[names[10 + k]] = w.framework_ns.get(names[10 + k], 0) + d
        w.line_ns[frames[sf]] = w.line_ns.get(frames[sf], 0) + d
        w.op_ns[ops[k][0]] = w.op_ns.get(ops[k][0], 0) + d
    put("Instruction", rows, parts=3)
    ids = sorted(names)
    put("FrameworkInstruction", {"id": ids, "raw_framework_id": ids, "framework_name": [names[i] for i in ids],
                                 "start_ts": [0] * len(ids), "end_ts": [0] * len(ids)})
    # frame 1: forward at line 12, frame 2: step at line 20, both called from <module> line 40 (frame 3)
    put("StackFrame", {"id": ["1", "2", "3"], "file_location_id": [1, 2, 3], "parent_frame_id": ["3", "3", "0"]})
    put("StackFrameFileLocation", {"id": ["1", "2", "3"], "file_name_id": [1, 1, 1], "function_name_id": [1, 2, 3],
                                   "line_number": [12, 20, 40]})
    put("StackFrameFileName", {"id": ["1"], "name": [USER_FILE]})
    put("StackFrameFunctionName", {"id": ["1", "2", "3"], "name": ["forward", "step", "<module>"]})
    w.summary = {"total_time": 0.01, "mfu_estimated_percent": 41.5, "mbu_estimated_percent": 63.0,
                 "hfu_estimated_percent": 44.25, "dma_active_time_percent": 12.5,
                 "tensor_engine_active_time_percent": 15.0, "vector_engine_active_time_percent": 3.5}
    put("Summary", {k: [v] for k, v in w.summary.items()})
    tens, vec = w.instructions["tensor"], w.instructions["vector"]
    w.opcodes = [dict(engine="tensor", opcode="MATMUL", instruction_count=tens[0], instruction_time_ns=tens[1],
                      active_time_ns=tens[1], active_time_percent=15.0),
                 dict(engine="vector", opcode="ACT", instruction_count=vec[0], instruction_time_ns=vec[1],
                      active_time_ns=vec[1], active_time_percent=3.5)]
    put("OpcodeSummary", {k: [o[k] for o in w.opcodes] for k in w.opcodes[0]})
