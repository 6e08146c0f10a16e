"""The stand-in ``neuron-explorer view --output-format perfetto`` and ``summary-json``, from the tables the
stand-in processes (`_explorer_view`) and the emulated capture's clock sync points.

Sources: aws-neuron-sdk tools/neuron-explorer/view-perfetto.rst (``system_profile.pftrace`` for the system
profile and one ``device_profile_model_<model_id>.pftrace`` per unique compiled model executed on a Neuron
Device; system events grouped into Perfetto processes by ``instance_id,process_id`` and into rows by
``worker_gid,lnc_idx,thread_id``; each event shows ``lnc_idx`` and ``worker_gid``), how-to-profile-workload.rst
(a device profile is of the first execution of each NEFF per NeuronCore), torch-neuronx-facts "Profiler" (the
export aligns host and device clocks with sync points: ``adjusted = sync_cpu + (event_dev - sync_dev)``), the
2.34 announcement (summary-json stays) and get-started.rst (the summary formats print without the UI).

**The documents give no more of the layouts.** What the stand-in chooses, and says in docs/trainium.md: system
events carry the SystemProfileEvents fields as debug annotations (``trace_event_source``, ``lnc_idx`` for
``nc_idx``, ``worker_gid``, ``thread_id``...), flows on the shared ``flow_id``; ``CpuUsage`` / ``HostMemUsage``
as counter tracks of a host process; a device file holds one execution of its NEFF: an ``execution`` row and
the engines' busy rows of each physical core, on the host clock (aligned through the capture's sync points);
summary-json is ``{device_profile_name: {Summary field: value}}`` printed to stdout (and written to
``--output-file`` when one is given).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from neuron_prof.emulator import _explorer_view as view
from neuron_prof.formats import EXPLORER_PFTRACE

SYSTEM_FILE, DEVICE_GLOB = EXPLORER_PFTRACE.names
DEVICE_FILE = DEVICE_GLOB.replace("*", "{}")
_SEQ = 1


def write_perfetto(run_dir: Path, out: Path, device: bool = True, system: bool = True) -> tuple[int, list[str]]:
    """(`system`) system_profile.pftrace and (`device`) the device_profile_model_<id>.pftrace files of `run_dir`
    into `out`; (captures processed, warnings)."""
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as tmp:
        tables = Path(tmp)
        n, warnings = view.process(run_dir, tables, device, system)
        out.mkdir(parents=True, exist_ok=True)
        if system:
            w = _Writer()
            ev = pq.read_table(tables / "SystemProfileEvents.parquet").to_pylist() if n else []
            _system(w, ev)
            for t, what in (("CpuUsage", "cpu"), ("HostMemUsage", "mem")):
                if (tables / f"{t}.parquet").is_file():
                    _host_usage(w, pq.read_table(tables / f"{t}.parquet").to_pylist(), what)
            (out / SYSTEM_FILE).write_bytes(w.data())
        if device:
            _devices(run_dir, tables, out)
    return n, warnings


def summary_json(run_dir: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """{device_profile_name: Summary row} of `run_dir`'s device profiles (none: {})."""
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as tmp:
        _, warnings = view.process(run_dir, Path(tmp))
        out = {}
        for d in sorted(p for p in Path(tmp).iterdir() if (p / "Summary.parquet").is_file()):
            row = pq.read_table(d / "Summary.parquet").to_pylist()[0]
            out[d.name] = {k: v for k, v in row.items() if v is not None}
    return out, warnings


class _Writer:
    """Packets of one sequence: track descriptors, BEGIN/END pairs, counters (perfetto protos, no interning)."""

    def __init__(self) -> None:
        from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

        self.trace = Trace()
        self.uuid = 0
        self.first = True

    def _packet(self) -> Any:
        p = self.trace.packet.add()
        p.trusted_packet_sequence_id = _SEQ
        if self.first:
            p.sequence_flags = 3
            self.first = False
        return p

    def process(self, pid: int, name: str, ts: int) -> int:
        """A process track; `ts`: its descriptor's time (trace_processor wants one: the first event's)."""
        self.uuid += 1
        p = self._packet()
        p.timestamp = int(ts)
        d = p.track_descriptor
        d.uuid, d.process.pid, d.process.process_name = self.uuid, pid, name
        return self.uuid

    def track(self, parent: int, name: str, unit: int | None = None) -> int:
        """A named track under `parent` (0: a top-level track); a counter track when `unit` is given (3: bytes,
        else 0: unspecified)."""
        self.uuid += 1
        d = self._packet().track_descriptor
        d.uuid, d.name = self.uuid, name
        if parent:
            d.parent_uuid = parent
        if unit is not None:
            d.counter.SetInParent()
            if unit:
                d.counter.unit = unit
        return self.uuid

    def slice(self, track: int, start: int, end: int, name: str, args: dict[str, Any],
              flows: list[int] | None = None) -> None:
        p = self._packet()
        p.timestamp = int(start)
        e = p.track_event
        e.type, e.track_uuid, e.name = 1, track, name
        for k, v in args.items():
            if v is None:
                continue
            a = e.debug_annotations.add()
            a.name = k
            if isinstance(v, bool):
                a.bool_value = v
            elif isinstance(v, int):
                a.int_value = v
            elif isinstance(v, float):
                a.double_value = v
            else:
                a.string_value = str(v)
        for f in flows or ():
            e.flow_ids.append(f)
        q = self._packet()
        q.timestamp = int(max(end, start))
        q.track_event.type, q.track_event.track_uuid = 2, track

    def counter(self, track: int, ts: int, value: float) -> None:
        p = self._packet()
        p.timestamp = int(ts)
        e = p.track_event
        e.type, e.track_uuid, e.double_counter_value = 4, track, float(value)

    def data(self) -> bytes:
        return bytes(self.trace.SerializeToString())


def _lanes(rows: list[tuple[int, int, int]]) -> list[int]:
    """Lane of each (start, end, i) so that slices on one lane nest (Perfetto cannot show partial overlaps)."""
    lane = [0] * len(rows)
    stacks: list[list[int]] = []
    for s, e, i in sorted(rows, key=lambda r: (r[0], -(r[1] - r[0]))):
        for k, st in enumerate(stacks + [[]]):
            while st and st[-1] <= s:
                st.pop()
            if not st or e <= st[-1]:
                if k == len(stacks):
                    stacks.append(st)
                st.append(e)
                lane[i] = k
                break
    return lane


def _system(w: _Writer, ev: list[dict[str, Any]]) -> None:
    """SystemProfileEvents, grouped as the tool's default groups (module docstring)."""
    procs: dict[tuple[Any, Any], int] = {}
    rows: dict[tuple[Any, ...], list[int]] = {}
    for i, r in enumerate(ev):
        key = (r["instance_id"], r["process_id"])
        if key not in procs:
            first = min(e["start_ts"] for e in ev if (e["instance_id"], e["process_id"]) == key)
            procs[key] = w.process(int(r["process_id"]), f"{r['instance_id']} pid {r['process_id']}", first)
        rows.setdefault((*key, r["worker_gid"], r["nc_idx"], r["thread_id"]), []).append(i)
    for (inst, pid, gid, lnc, tid), idx in rows.items():
        name = " ".join(f"{k} {v}" for k, v in (("worker", gid), ("lnc", lnc), ("thread", tid)) if v is not None)
        lanes = _lanes([(ev[i]["start_ts"], ev[i]["end_ts"], k) for k, i in enumerate(idx)])
        tracks: dict[int, int] = {}
        for k, i in enumerate(idx):
            if lanes[k] not in tracks:
                tracks[lanes[k]] = w.track(procs[(inst, pid)], name)  # same name: shown merged
            r = ev[i]
            args = {"id": r["id"], "trace_event_source": r["trace_event_source"], "instance_id": inst,
                    "process_id": pid, "thread_id": tid, "lnc_idx": lnc, "pcore_idx": r["pcore_idx"],
                    "worker_gid": gid, "framework_stream_id": r.get("framework_stream_id")}
            args.update(orjson.loads(r["extra_attributes_json"]) if r.get("extra_attributes_json") else {})
            flows = [(int(pid) << 40) | int(f) for f in r["flow_id"] or ()]
            w.slice(tracks[lanes[k]], r["start_ts"], r["end_ts"], r["name"], args, flows)


def _host_usage(w: _Writer, rows: list[dict[str, Any]], what: str) -> None:
    """CpuUsage (per cpu_id, %) and HostMemUsage (bytes, %) as counter tracks under one track per instance."""
    procs: dict[str, int] = {}
    tracks: dict[tuple[str, str], int] = {}
    series = ((lambda r: f"CPU {r['cpu_id']} utilisation", "util_percent", 0),) if what == "cpu" else \
        ((lambda r: "host memory used", "used_bytes", 3), (lambda r: "host memory used %", "used_percent", 0))
    for r in sorted(rows, key=lambda r: r["timestamp"]):
        inst = str(r["instance_id"])
        if inst not in procs:
            procs[inst] = w.track(0, f"{inst} host")
        for name_of, col, unit in series:
            if r.get(col) is None:
                continue
            key = (inst, name_of(r))
            if key not in tracks:
                tracks[key] = w.track(procs[inst], key[1], unit=unit)
            w.counter(tracks[key], r["timestamp"], r[col])


def _devices(run_dir: Path, tables: Path, out: Path) -> None:
    """One file per unique NEFF: its first execution (per device profile, in capture order)."""
    import pyarrow.parquet as pq

    seen: dict[str, int] = {}
    for f in sorted(f for cap in view.captures(run_dir) for f in cap.glob("*.ntff")):
        d = tables / view.device_profile_name(f)
        if not (d / "ExecutionInfo.parquet").is_file():
            continue
        info = orjson.loads(str(view.load_npz(f)["info"][0]))
        sync = info["sync_points"]
        meta = pq.read_table(d / "Metadata.parquet").to_pylist()[0]
        base = int(meta["first_hw_timestamp"])
        ex = pq.read_table(d / "ExecutionInfo.parquet").to_pylist()
        at = pq.read_table(d / "ActiveTime.parquet").to_pylist() if (d / "ActiveTime.parquet").is_file() else []
        for r in ex:
            neff = str(r["neff_name"])
            if neff in seen:
                continue
            seen[neff] = model = len(seen)
            a, z = base + int(r["execution_start_ts"]), base + int(r["execution_end_ts"])
            w = _Writer()
            host = lambda t, sync=sync: int(view.to_host(np.asarray([t], dtype=np.int64), sync)[0])  # noqa: E731
            proc = w.process(model + 1, f"NeuronCore {meta['neuroncore_idx']} model {model} ({neff})", host(a))
            w.slice(w.track(proc, "execution"), host(a), host(z), neff,
                    {"neff_name": neff, "execution_index": r["execution_index"]})
            tracks: dict[tuple[int, str], int] = {}
            for b in at:
                if b["start_ts"] >= a and b["end_ts"] <= z:
                    key = (int(b["pcore_idx"]), str(b["engine"]))
                    if key not in tracks:
                        tracks[key] = w.track(proc, f"pcore {key[0]} {key[1]} engine")
                    w.slice(tracks[key], host(b["start_ts"]), host(b["end_ts"]), key[1], {"pcore_idx": key[0]})
            (out / DEVICE_FILE.format(model)).write_bytes(w.data())
