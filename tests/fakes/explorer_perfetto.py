"""Files shaped as Neuron Explorer's ``--output-format perfetto`` output, from what its documents say and no more.

aws-neuron-sdk view-perfetto.rst: ``system_profile.pftrace`` for the system profile, one
``device_profile_model_<model_id>.pftrace`` per unique compiled model; system events grouped into Perfetto
processes by ``instance_id,process_id`` and rows by ``worker_gid,lnc_idx,thread_id``; each event shows its
``lnc_idx`` and ``worker_gid``. neuron-explorer-facts: ``nc_exec_running`` is a NEFF execution on a core (host
clock); ``trace_event_source`` is ``framework``, ``neuron_rt`` or ``neuron_hw``. **The documents give no more of
the layout** (track names, the device file's rows): those here are arbitrary, and the reader must not need them.
Written with the perfetto package's protos; every file goes through pftrace_check in the tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

T0 = 1_765_000_000_000_000_000
"""A Unix-ns instant (2025-12)."""


class PerfettoFile:
    """One sequence: descriptors, BEGIN/END pairs with debug annotations and flow ids."""

    def __init__(self) -> None:
        self.trace = Trace()
        self.uuid = 0

    def _packet(self, ts: int | None = None) -> Any:
        p = self.trace.packet.add()
        p.trusted_packet_sequence_id = 7
        if len(self.trace.packet) == 1:
            p.sequence_flags = 3
        if ts is not None:
            p.timestamp = ts
        return p

    def process(self, pid: int, name: str, ts: int) -> int:
        self.uuid += 1
        d = self._packet(ts).track_descriptor
        d.uuid, d.process.pid, d.process.process_name = self.uuid, pid, name
        return self.uuid

    def row(self, parent: int, name: str) -> int:
        self.uuid += 1
        d = self._packet().track_descriptor
        d.uuid, d.name, d.parent_uuid = self.uuid, name, parent
        return self.uuid

    def slice(self, track: int, start: int, dur: int, name: str, args: dict[str, Any] | None = None,
              flow: int | None = None) -> None:
        e = self._packet(start).track_event
        e.type, e.track_uuid, e.name = 1, track, name
        for k, v in (args or {}).items():
            a = e.debug_annotations.add()
            a.name = k
            if isinstance(v, int):
                a.int_value = v
            else:
                a.string_value = str(v)
        if flow is not None:
            e.flow_ids.append(flow)
        end = self._packet(start + dur).track_event
        end.type, end.track_uuid = 2, track

    def write(self, path: Path) -> Path:
        path.write_bytes(self.trace.SerializeToString())
        return path


def system_profile(folder: Path, executions: list[tuple[int, int]],
                   framework: tuple[tuple[str, int, int], ...] | list[tuple[str, int, int]] = (),
                   pid: int = 4242, tid: int = 4242) -> Path:
    """``system_profile.pftrace`` of one process: `executions` (start, duration) as ``nc_exec_running`` on lnc 0
    (hardware), each with an ``nrt_execute`` (runtime) of the same span and flow; `framework` (name, start,
    duration) events of the framework, the k-th sharing the k-th execution's flow."""
    f = PerfettoFile()
    first = min([s for s, _ in executions] + [s for _, s, _ in framework])
    proc = f.process(pid, f"i-0abc pid {pid}", first)
    hw = f.row(proc, f"worker 0 lnc 0 thread {tid}")
    fw = f.row(proc, f"worker 0 thread {tid}")
    base = {"instance_id": "i-0abc", "process_id": pid, "thread_id": tid, "worker_gid": 0}
    for k, (name, start, dur) in enumerate(framework):
        f.slice(fw, start, dur, name, {**base, "trace_event_source": "framework"}, flow=k + 1)
    for k, (start, dur) in enumerate(executions):
        f.slice(hw, start, dur, "nrt_execute", {**base, "lnc_idx": 0, "trace_event_source": "neuron_rt"},
                flow=k + 1)
    rows = f.row(proc, f"worker 0 lnc 0 thread {tid} hw")
    for k, (start, dur) in enumerate(executions):
        f.slice(rows, start, dur, "nc_exec_running", {**base, "lnc_idx": 0, "trace_event_source": "neuron_hw"},
                flow=k + 1)
    return f.write(folder / "system_profile.pftrace")


def device_profile(folder: Path, model_id: int, start: int, slices: list[tuple[str, int, int]]) -> Path:
    """``device_profile_model_<model_id>.pftrace``: `slices` (row name, offset, duration) from `start`."""
    f = PerfettoFile()
    proc = f.process(1, f"model {model_id}", start)
    rows: dict[str, int] = {}
    for name, off, dur in slices:
        if name not in rows:
            rows[name] = f.row(proc, name)
        f.slice(rows[name], start + off, dur, name)
    return f.write(folder / f"device_profile_model_{model_id}.pftrace")
