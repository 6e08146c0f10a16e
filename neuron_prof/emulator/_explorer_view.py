"""The stand-in ``neuron-explorer view``: a run directory of the emulated runtime's captures into Parquet tables,
as Neuron Explorer's would be (`neuron_explorer` is the command; `_explorer_schema` the schema it declares).

Sources: shared/design/neuron-explorer-facts.md ("Processing": ``view -d <dir> --output-format parquet``, one
Parquet file per table, ``SchemaFields``, ``Warning``; host/device clocks aligned with sync points,
``adjusted = sync_cpu + (ev_dev - sync_dev)``; "Tables that matter", schema 7.4.0) and issue 21 (the glossary: the
device profile is on the device clock, the system profile on the host clock; ``ExecutionInfo`` times relative to
the profile start; host/device copies are ``dmem_buf_copyin``/``dmem_buf_copyout``). The layout it writes is
documented in docs/trainium.md ("The stand-in neuron-explorer"). Per capture folder (``ntrace*.pb`` / ``*.ntff``):

* system profile (host Unix ns): ``SystemProfileEvents`` (the framework op that issued each execution the
  folder's framework mapping names, read from its ``trace.json`` / ``pytorch_trace.json``; none for an execution
  the mapping lacks, as under ``NEURON_LAUNCH_BLOCKING=1``, where it is empty; ``nrt_execute`` on the runtime; ``nc_exec_running``
  on the hardware, moved to the host clock through the nearest earlier sync point; copies as
  ``dmem_buf_copyin``/``dmem_buf_copyout`` on the hardware too (DMA); all sharing a ``flow_id``, the
  ``nrt_sequence_id``),
  ``SystemProfileMetadata``, ``SystemProfileHbmUsage``; ``CpuUsage`` / ``HostMemUsage`` from ``cpu_util.pb`` /
  ``host_mem.pb`` when the capture asked for CPU_UTIL / HOST_MEMORY (`profiling.host_usage`);
* device profile (device clock): ``Metadata.first_hw_timestamp``/``last_hw_timestamp``, ``ExecutionInfo``
  (relative to ``first_hw_timestamp``), ``ActiveTime``, ``HbmUsage`` (bandwidth), ``CcOp``, ``Summary``,
  ``OpcodeSummary``, ``DeviceProfileList``; an execution whose NEFF is in neither the capture folder nor the
  run directory is left out, with a ``Warning`` (the docs: an NTFF cannot be processed without its NEFF).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson

from neuron_prof.emulator import _explorer_schema as schema
from neuron_prof.emulator.profiling import host_usage
from neuron_prof.model.order import searchsorted, sorted_unique

_MATRIX = ("mm", "addmm", "bmm", "baddbmm", "_addmm_activation", "convolution", "_scaled_dot_product")
_CC_NAMES = {"allreduce": "AllReduce", "allgather": "AllGather", "_allgather_base": "AllGather",
             "reduce_scatter": "ReduceScatter", "_reduce_scatter_base": "ReduceScatter", "broadcast": "Broadcast",
             "alltoall": "AllToAll", "reduce": "Reduce", "gather": "Gather", "scatter": "Scatter",
             "barrier": "Barrier"}
FRAMEWORK_TRACES = ("trace.json", "pytorch_trace.json")


HostOps = dict[int, tuple[np.ndarray, np.ndarray, list[str]]]
"""Thread id -> its cpu_ops' (start ns, end ns, names), sorted by start."""


def host_ops(trace_json: Path) -> HostOps:
    """trace.json's cpu_ops per thread id: (start ns, end ns, names), sorted by start. Read as Explorer reads
    the framework trace, through neuron-prof's Kineto reader (Kineto's JSON is not always valid JSON: names
    with quotes are written unescaped) keeping only cpu_op events."""
    from neuron_prof.loaders.json.reader import load_kineto_json

    def cpu_ops(events: list[Any]) -> list[Any]:
        return [e for e in events if isinstance(e, dict) and e.get("cat") == "cpu_op" and e.get("ph") == "X"]

    tr = load_kineto_json(trace_json, transform=cpu_ops)
    sl = tr.slices
    tids = np.asarray([t.tid if isinstance(t.tid, int) else -1 for t in tr.tracks] or [-1], dtype=np.int64)
    tid = tids[np.asarray(sl.track, dtype=np.int64)] if len(sl) else np.zeros(0, dtype=np.int64)
    out = {}
    for t in sorted_unique(tid).tolist():
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
    j = int(searchsorted(start, at, "right")) - 1
    while j >= 0:
        if end[j] >= at and "::" in names[j]:
            return int(start[j]), int(end[j]), names[j]
        j -= 1
    return None


def captures(run_dir: Path) -> list[Path]:
    """Capture folders under `run_dir` (itself included): those holding the runtime's files."""
    found = {p.parent for g in ("ntrace*.pb", "*.ntff") for p in run_dir.rglob(g)}
    return sorted(found)


class _Out:
    """Rows per table, written once at the end."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, list[Any]]] = {}

    def add(self, table: str, **cols: list[Any]) -> None:
        t = self.rows.setdefault(table, {f: [] for f, _, _, _ in schema.fields(table)})
        n = len(next(iter(cols.values()))) if cols else 0
        for f in t:
            v = cols.get(f)
            t[f].extend(v if v is not None else [None] * n)

    def write(self, out: Path) -> list[Path]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        out.mkdir(parents=True, exist_ok=True)
        self.add("SchemaFields", **schema.schema_rows())
        written = []
        for table, cols in self.rows.items():
            types = {f: schema.arrow_type(t) for f, t, _, _ in schema.fields(table)}
            pq.write_table(pa.table({f: pa.array(v, type=types[f]) for f, v in cols.items()}),
                           out / f"{table}.parquet")
            written.append(out / f"{table}.parquet")
        return written


def process(run_dir: Path, out: Path, device: bool = True, system: bool = True) -> tuple[int, list[str]]:
    """Write the tables of every capture under `run_dir` into `out`; (captures processed, warnings).
    `device` False: ``--ignore-device-profile`` (the .ntff files are not processed); `system` False:
    ``--ignore-system-profile`` (no ``SystemProfile*``, ``CpuUsage``, ``HostMemUsage``: the docs say only "device-only
    view", so which tables go is ours)."""
    o = _Out()
    warnings: list[str] = []
    caps = captures(run_dir)
    next_id = [0]
    for cap in caps if system else []:
        warnings += _system(o, cap, next_id)
    if device:
        warnings += _device(out, caps, run_dir)
    infos = [orjson.loads(p.read_bytes()) for cap in caps for p in sorted(cap.glob("trace_info*.pb"))]
    if infos:  # the run's own Metadata: its schema version, the device clock over the whole run
        _metadata(o, min(int(i["sync_points"][0][1]) for i in infos),
                  max(int(i["sync_points"][-1][1]) for i in infos), infos[0], run_dir.name)
    if warnings:
        o.add("Warning", message=warnings, category=["emulated_runtime"] * len(warnings))
    o.write(out)
    return len(caps), warnings


def load_npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def to_host(dev: np.ndarray, sync: list[list[int]]) -> np.ndarray:
    """Device-clock ns -> host ns by the nearest earlier sync point (neuron-explorer-facts, "Processing")."""
    h = np.asarray([s[0] for s in sync], dtype=np.int64)
    d = np.asarray([s[1] for s in sync], dtype=np.int64)
    k = np.clip(searchsorted(d, dev, "right") - 1, 0, len(d) - 1)
    return h[k] + (dev - d[k])


def _framework_trace(cap: Path) -> Path | None:
    for d in (cap, cap.parent):
        for n in FRAMEWORK_TRACES:
            if (d / n).is_file():
                return d / n
    return None


def _mapped(cap: Path) -> set[int]:
    """The runtime sequence ids (``nrta_seq_id``) the capture's ``framework_mapping_*.json`` ties to a framework op:
    only those executions get their framework event and flow."""
    out: set[int] = set()
    for f in cap.glob("framework_mapping_*.json"):
        try:
            doc = orjson.loads(f.read_bytes())
        except (OSError, orjson.JSONDecodeError):
            continue
        out.update(int(d["nrta_seq_id"]) for d in doc.get("data") or () if "nrta_seq_id" in d)
    return out


def _system(o: _Out, cap: Path, next_id: list[int]) -> list[str]:
    warnings: list[str] = []
    for f in sorted(cap.glob("ntrace*.pb")):
        ev = load_npz(f)
        info = orjson.loads((cap / f.name.replace("ntrace", "trace_info")).read_bytes())
        kinds = info["kind_names"]
        sync = info["sync_points"]
        tj = _framework_trace(cap)
        ops = host_ops(tj) if tj is not None else {}
        if tj is None:
            warnings.append(f"{cap}: no framework trace (trace.json): framework events not added")
        mapped = _mapped(cap)
        hw_s, hw_e = to_host(ev["hw_start"], sync), to_host(ev["hw_end"], sync)
        rows: list[dict[str, Any]] = []
        seen: dict[tuple[int, int, str], int] = {}
        for i in range(len(ev["kind"])):
            kind = kinds[int(ev["kind"][i])]
            if kind == "collective":
                continue  # the device profile's CcOp
            dev, tid = int(ev["device"][i]), int(ev["th_id"][i])
            flow = str(int(ev["nrt_sequence_id"][i]))
            op = _issuer(ops, tid, int(ev["host_ns"][i])) if int(flow) in mapped else None
            if op is not None:
                k = seen.get((tid, op[0], op[2]))
                if k is None:
                    seen[(tid, op[0], op[2])] = len(rows)
                    rows.append(_event(op[2], op[0], op[1], "framework", tid, None, [flow], None))
                else:
                    rows[k]["flow"].append(flow)
            link = [flow] if op is not None else None
            s, e = int(hw_s[i]), int(hw_e[i])
            name = str(ev["names"][i])
            if kind in ("op", "graph"):
                extra = {"neff_name": str(ev["neff"][i]), "nrt_sequence_id": int(flow)}
                rows.append(_event("nrt_execute", s, e, "neuron_rt", tid, dev, link, extra))
                rows.append(_event("nc_exec_running", s, e, "neuron_hw", tid, dev, link, extra))
            else:  # host<->device buffer copies (MemoryBandwidthDirection), DMA on the device's timeline
                copy = "dmem_buf_copyin" if kind == "copy_h2d" else "dmem_buf_copyout"
                extra = {"op": name} if " (copy to " in name else {}
                rows.append(_event(copy, s, e, "neuron_hw", tid, dev, link, extra))
        n = len(rows)
        pid, inst = int(info["process_id"]), str(info["instance_id"])
        o.add("SystemProfileEvents", id=list(range(next_id[0], next_id[0] + n)), name=[r["name"] for r in rows],
              start_ts=[r["start"] for r in rows], end_ts=[r["end"] for r in rows],
              duration_ns=[r["end"] - r["start"] for r in rows], trace_event_source=[r["src"] for r in rows],
              instance_id=[inst] * n, process_id=[pid] * n, thread_id=[r["tid"] for r in rows],
              nc_idx=[r["nc"] for r in rows], pcore_idx=[r["nc"] for r in rows], worker_gid=[0] * n,
              flow_id=[r["flow"] for r in rows], extra_attributes_json=[r["extra"] for r in rows])
        next_id[0] += n
        first, last = int(info["host_start_ns"]), int(info["host_stop_ns"])
        o.add("SystemProfileMetadata", first_ts=[_iso(first)], last_ts=[_iso(last)], first_ts_ns=[str(first)],
              last_ts_ns=[str(last)], ntff_version=[0], hbm_capacity_bytes=[int(info["hbm_capacity_bytes"])])
        for table, cols in host_usage.tables(cap, inst).items():  # CPU_UTIL / HOST_MEMORY captured
            o.add(table, **cols)
        alloc, reserved = info["memory"]
        o.add("SystemProfileHbmUsage", timestamp=[last], total_bytes=[int(reserved)], tensors_bytes=[int(alloc)],
              unknown_bytes=[int(reserved) - int(alloc)], device_idx=[0], hbm_idx=[0], instance_id=[inst])
        if int(info.get("events_lost") or 0):
            warnings.append(f"{info['events_lost']} trace events were dropped in {cap.name} (the runtime's ring "
                            "buffer, max_events_per_nc, was full)")
    return warnings


def _iso(ns: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ns / 1e9, datetime.UTC).isoformat()


def _event(name: str, start: int, end: int, src: str, tid: int, core: int | None, flow: list[str] | None,
           extra: dict[str, Any] | None) -> dict[str, Any]:
    return {"name": name, "start": start, "end": end, "src": src, "tid": tid, "nc": core, "flow": flow,
            "extra": orjson.dumps(extra).decode() if extra else None}


def _merged(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, z in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], z)
        else:
            out.append([a, z])
    return [(a, z) for a, z in out]


def _device(out: Path, caps: list[Path], run_dir: Path) -> list[str]:
    """Each .ntff's device profile (device clock) in a folder of its own, ``out/<device_profile_name>/``, with its
    Metadata and DeviceProfileList (the system tables stay in `out`)."""
    warnings: list[str] = []
    ntffs = sorted(f for cap in caps for f in cap.glob("*.ntff"))
    neffs = {p.name for p in run_dir.rglob("*.neff")}
    for f in ntffs:
        name = device_profile_name(f)
        o = _Out()
        warnings += _one_device_profile(o, f, name, neffs)
        o.write(out / name)
    return warnings


def device_profile_name(ntff: Path) -> str:
    """The name (and sub-folder) of one .ntff's device profile: ``<instance>_pid_<pid>_<timestamp>_<stem>``."""
    return "_".join(p for p in (ntff.parent.parent.name, ntff.parent.name, ntff.stem) if p)


def _one_device_profile(o: _Out, f: Path, name: str, neffs: set[str]) -> list[str]:
    """One NTFF's tables; executions whose NEFF is missing are left out (a warning says which)."""
    warnings: list[str] = []
    index = 0
    z = load_npz(f)
    info = orjson.loads(str(z["info"][0]))
    kinds = info["kind_names"]
    first, last = int(z["first_hw"][0]), int(z["last_hw"][0])
    exe = np.flatnonzero(np.isin(z["kind"], [kinds.index("op"), kinds.index("graph")]))
    have = np.asarray([str(n) in neffs for n in z["neff"][exe]], dtype=bool)
    if not have.all():
        missing = sorted({str(n) for n in z["neff"][exe][~have]})
        warnings.append(f"{f.name}: {int((~have).sum())} executions left out: their NEFF is not in the capture "
                        f"or the run directory ({', '.join(missing[:3])}{'...' if len(missing) > 3 else ''}; "
                        "NeuronConfig's neff_cache_dir names the cache the job compiles into, whose NEFFs are "
                        "copied into the capture on stop)")
    exe = exe[have]
    start, end = z["start"], z["end"]
    n = len(exe)
    o.add("ExecutionInfo", execution_index=list(range(index, index + n)),
          neff_name=[str(x) for x in z["neff"][exe]], execution_start_ts=(start[exe] - first).tolist(),
          execution_end_ts=(end[exe] - first).tolist(), num_subgraphs=[1] * n, row_count=[2] * n)
    index += n
    busy: dict[str, list[tuple[int, int]]] = {}
    ops: dict[tuple[str, str], list[int]] = {}
    for i in exe.tolist():
        base = str(z["names"][i]).split("::")[-1]
        eng = "tensor" if base.startswith(_MATRIX) else "vector"
        busy.setdefault(eng, []).append((int(start[i]), int(end[i])))
        ops.setdefault((eng, base), []).append(int(end[i] - start[i]))
    total_ns = max(last - first, 1)
    at = [(e, a, b) for e, iv in sorted(busy.items()) for a, b in sorted(iv)]  # one per execution: none spans two
    for pcore in (0, 1):  # LNC=2: both physical cores of the logical core run each execution
        o.add("ActiveTime", start_ts=[a for _, a, _ in at], end_ts=[b for _, _, b in at],
              engine=[e for e, _, _ in at], pcore_idx=[pcore] * len(at), duration_ns=[b - a for _, a, b in at])
    active = {e: sum(b - a for a, b in _merged(iv)) for e, iv in busy.items()}
    o.add("OpcodeSummary", engine=[e for e, _ in ops], opcode=[b for _, b in ops],
          instruction_count=[len(v) for v in ops.values()], instruction_time_ns=[sum(v) for v in ops.values()],
          active_time_ns=[sum(v) for v in ops.values()],
          active_time_percent=[100.0 * sum(v) / total_ns for v in ops.values()])
    nbytes, flops = z["nbytes"][exe], z["flops"][exe]
    o.add("HbmUsage", timestamp=start[exe].tolist(),
          current_throughput=(nbytes / np.maximum(end[exe] - start[exe], 1) * 1e9).tolist(),
          total_transfer_bytes=np.cumsum(nbytes).tolist(), pcore_idx=[0] * n)
    cc = _cc(o, z, info, kinds)
    copies = np.flatnonzero(np.isin(z["kind"], [kinds.index("copy_h2d"), kinds.index("copy_d2h")]))
    dma = sum(b - a for a, b in _merged([(int(start[i]), int(end[i])) for i in copies.tolist()]))
    secs = total_ns / 1e9
    mf = float(flops.sum())
    pct = lambda ns: 100.0 * ns / total_ns  # noqa: E731
    busy_all = sum(b - a for a, b in _merged([(a, b) for iv in busy.values() for a, b in iv]))
    o.add("Summary", total_time=[secs], model_flops=[int(mf)], hardware_flops=[int(mf)],
          mfu_estimated_percent=[100.0 * mf / (info["peak_flops"] * secs)],
          hfu_estimated_percent=[100.0 * mf / (info["peak_flops"] * secs)],
          mbu_estimated_percent=[100.0 * float(nbytes.sum()) / (info["hbm_bytes_per_s"] * secs)],
          tensor_engine_active_time=[active.get("tensor", 0) / 1e9],
          tensor_engine_active_time_percent=[pct(active.get("tensor", 0))],
          vector_engine_active_time=[active.get("vector", 0) / 1e9],
          vector_engine_active_time_percent=[pct(active.get("vector", 0))],
          dma_active_time=[dma / 1e9], dma_active_time_percent=[pct(dma)], cc_op_active_time=[cc / 1e9],
          cc_op_active_time_percent=[pct(cc)], cc_op_count=[int((z["kind"] == kinds.index("collective")).sum())],
          total_active_time=[busy_all / 1e9], total_active_time_percent=[pct(busy_all)])
    o.add("DeviceProfileList", device_profile_name=[name], instance_id=[info["instance_id"]],
          process_id=[int(info["process_id"])], nc_id=[0], session_id=[int(info["session"])])
    _metadata(o, first, last, info, name)
    return warnings


def _metadata(o: _Out, first: int, last: int, info: dict[str, Any], name: str) -> None:
    o.add("Metadata", profile_schema_version=[schema.VERSION], ntff_version=[0], num_physical_cores=[2],
          vnc_enabled=[True], first_hw_timestamp=[first], last_hw_timestamp=[last],
          first_ts=[_iso(int(info["host_start_ns"]))], last_ts=[_iso(int(info["host_stop_ns"]))],
          hbm_ddr_bandwidth=[float(info["hbm_bytes_per_s"])], neuroncore_clock_freq=[1.0], ticks_per_nanosec=[1],
          instance_type=[info["instance_type"]], runtime_version=["emulated"], driver_version=["emulated"],
          explorer_version=["emulated"], compiler_version=["emulated"], neuroncore_idx=[0], neuron_device_idx=[0],
          profile_name=[name], is_simulation=[True])


def _cc(o: _Out, z: dict[str, np.ndarray], info: dict[str, Any], kinds: list[str]) -> int:
    """CcOp rows (device clock), bandwidths in bytes/s (algbw = bytes / time, busbw as nccl-tests); busy ns."""
    rows = []
    for i in np.flatnonzero(z["kind"] == kinds.index("collective")).tolist():
        seq = int(z["nrt_sequence_id"][i])
        nbytes, ranks = (info.get("cc") or {}).get(str(seq), (0, 1))
        a, b = int(z["start"][i]), int(z["end"][i])
        op = _CC_NAMES.get(str(z["names"][i]), str(z["names"][i]))
        algbw = nbytes / ((b - a) / 1e9) if b > a else 0.0
        rows.append((a, b, op, int(nbytes), algbw, algbw * (2.0 if op == "AllReduce" else 1.0) * (ranks - 1) / ranks,
                     ranks, seq))
    n = len(rows)
    o.add("CcOp", start_ts=[r[0] for r in rows], end_ts=[r[1] for r in rows], duration_ns=[r[1] - r[0] for r in rows],
          operation=[r[2] for r in rows], algorithm=["Ring"] * n, num_elements=[None] * n, dtype=[None] * n,
          op_id=[r[7] for r in rows], stream_id=[0] * n, stream_index=list(range(n)), trigger_engine=["sync"] * n,
          input_size=[r[3] for r in rows], output_size=[r[3] for r in rows],
          algorithm_bandwidth=[r[4] for r in rows], bus_bandwidth=[r[5] for r in rows],
          replica_group=[",".join(map(str, range(r[6]))) for r in rows])
    return sum(b - a for a, b in _merged([(r[0], r[1]) for r in rows]))
