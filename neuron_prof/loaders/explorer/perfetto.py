"""Neuron Explorer's Perfetto output (``neuron-explorer view --output-format perfetto``) as ONE trace: the system
profile, each device profile placed on its clock, the capture's torch.profiler ops, and a summary-json.

    trace = load_explorer_pftrace("out/system_profile.pftrace")   # or the folder, or one device file

Sources: aws-neuron-sdk tools/neuron-explorer/view-perfetto.rst (the command writes ``system_profile.pftrace``
and one ``device_profile_model_<model_id>.pftrace`` per unique compiled model executed, "a detailed view of
hardware activity on the NeuronCore during execution of this graph"; system events are grouped into Perfetto
processes by ``instance_id,process_id`` and into rows by ``worker_gid,lnc_idx,thread_id``, and each event shows
its ``lnc_idx`` and ``worker_gid``), how-to-profile-workload.rst (device profiles are taken of the first
execution of each NEFF per NeuronCore), torch-neuronx-facts "Profiler" (the Perfetto export aligns host and
device clocks with sync points) and neuron-explorer-facts (``nc_exec_running``: a NEFF execution on a core,
host clock). **The documents give no more of either file's layout**: the files are read by the generic Perfetto
reader, and only the names above are relied on.

Joins, by the rules of the Parquet path (`capture`, `_clock`):

* the system profile is on the host clock (Unix ns); its events are added as they are;
* a device file already in Unix ns (the tool aligned it) is kept; one on the device clock is one execution
  (its span) paired with the system profile's ``nc_exec_running`` events by `_clock.from_executions` (the
  same duration-and-gap comparison; several equally good: the first, as the device profile is of the first
  execution); nothing to pair with: its rows are left out beside a host timeline, with a warning;
* torch.profiler's ``trace.json`` of the capture (beside the files, or the one process of the run directory
  above them) is read first; the system profile's framework events that are its ops (`capture.HostOps`: same
  name, start within `capture.JOIN_TOL_NS`) are not added twice and their flows start at those ops;
* a summary-json in the folder (`summary_json`) → ``metadata["neuron_explorer"]["summary"]``.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from neuron_prof.errors import TraceFormatError, TraceLoadError
from neuron_prof.formats import EXPLORER_PFTRACE
from neuron_prof.loaders.explorer._clock import UNIX_NS_MIN, DeviceClock, fallback, from_executions
from neuron_prof.loaders.explorer._events import FRAMEWORK, HARDWARE, RUNTIME
from neuron_prof.loaders.explorer.capture import PID_FOLDER, HostOps, _trace_json_in, capture_trace_json
from neuron_prof.loaders.explorer.reader import LACKS_KEY, lacks
from neuron_prof.loaders.explorer.summary_json import summaries_in
from neuron_prof.loaders.json.fill import read_bytes
from neuron_prof.loaders.json.reader import parse_kineto_into
from neuron_prof.loaders.pftrace.reader import load_pftrace
from neuron_prof.model import KinetoCat, Meta, ProcessKind, Trace, TraceBuilder, TrackKind

__all__ = ["DEVICE_GLOB", "SYSTEM_FILE", "explorer_files", "is_explorer_pftrace", "load_explorer_pftrace"]

SYSTEM_FILE, DEVICE_GLOB = EXPLORER_PFTRACE.names
EXECUTION = "nc_exec_running"
SOURCE_FORMAT = "neuron_explorer_perfetto"
EXPLORER_KEY = "neuron_explorer"


def is_explorer_pftrace(path: str | os.PathLike[str]) -> bool:
    """A file named as Neuron Explorer names its Perfetto output."""
    name = Path(path).name
    return name == SYSTEM_FILE or fnmatch.fnmatchcase(name, DEVICE_GLOB)


def explorer_files(folder: Path) -> tuple[Path | None, list[Path]]:
    """(system_profile.pftrace or None, the device_profile_model_*.pftrace files) of a folder."""
    system = folder / SYSTEM_FILE
    return (system if system.is_file() else None), sorted(p for p in folder.glob(DEVICE_GLOB) if p.is_file())


def load_explorer_pftrace(path: str | os.PathLike[str]) -> Trace:
    """Load Neuron Explorer's Perfetto output: the folder (or any of its files) as one trace.

    Raises:
        TraceLoadError: no such file, or a folder without Explorer's Perfetto files; TraceFormatError: a file
        that is not a Perfetto trace.
    """
    p = Path(path)
    folder = p if p.is_dir() else p.parent
    system, devices = explorer_files(folder)
    if p.is_file() and p.name != SYSTEM_FILE and p not in devices:
        devices = [p]
    if not p.exists():
        raise TraceLoadError(p, "no such file")
    if system is None and not devices:
        raise TraceLoadError(folder, f"holds no {SYSTEM_FILE} nor {DEVICE_GLOB}")
    b = TraceBuilder()
    warnings: list[str] = []
    own: dict[str, Any] = {"schema": {"version": "none", "declared_by": "Perfetto output: no schema"},
                           "perfetto": {"system": system.name if system else None,
                                        "devices": [d.name for d in devices]}}
    tj = _host_trace(folder)
    ops = None
    if tj is not None:
        try:
            parse_kineto_into(b, orjson.loads(read_bytes(tj, warnings)), str(tj))
        except orjson.JSONDecodeError as e:
            raise TraceFormatError(tj, f"not JSON ({e})") from None
        ops = HostOps(b)
        own["framework_trace"] = str(tj)
    execs = np.zeros((0, 2), dtype=np.int64)
    if system is not None:
        execs = _add_system(b, load_pftrace(system), ops, own)
    else:
        warnings.append(f"{folder}: no {SYSTEM_FILE}: the device profiles have no host executions to be "
                        "placed by")
    clocks = {}
    for d in devices:
        clocks[d.name] = _add_device(b, load_pftrace(d), d.name, execs, warnings, host=b.n_slices > 0)
    own["device_clock"] = clocks
    own[LACKS_KEY] = lacks(system=system is not None, device=bool(devices))
    summaries = summaries_in(folder)
    if summaries:
        own["summary_json"] = summaries
        per = [m for f in summaries.values() for m in f.values()]
        if len(per) == 1:
            own["summary"] = per[0]
    md = b.metadata
    md[EXPLORER_KEY] = own
    md[Meta.SOURCE] = str(folder)
    md[Meta.SOURCE_FORMAT] = SOURCE_FORMAT
    md[Meta.BACKEND] = "neuron"
    ts = np.asarray(b.s_ts or b.c_ts or [0], dtype=np.int64)
    end = ts + np.asarray(b.s_dur, dtype=np.int64) if b.s_ts else ts
    md[Meta.CLOCK] = "unix" if int(ts.min()) >= UNIX_NS_MIN else "relative"
    md[Meta.WALL] = [int(ts.min()), int(end.max())]
    if warnings:
        md[Meta.WARNINGS] = list(md.get(Meta.WARNINGS) or []) + warnings
    return b.build()


def _host_trace(folder: Path) -> Path | None:
    """The capture's torch.profiler trace: beside the files or in the capture folder above them, else the one
    process folder's of the run directory above (`capture.load_folder`'s rule for ``RUN_DIR/parquet``)."""
    tj = capture_trace_json(folder)
    if tj is not None:
        return tj
    pids = [d for d in sorted(folder.parent.iterdir()) if d.is_dir() and PID_FOLDER.match(d.name)]
    found = [t for t in (_trace_json_in(d, d) for d in pids) if t is not None]
    return found[0] if len(pids) == 1 and len(found) == 1 else None


_KIND = {FRAMEWORK: TrackKind.THREAD, RUNTIME: TrackKind.OTHER, HARDWARE: TrackKind.DEVICE}
_CAT = {FRAMEWORK: KinetoCat.CPU_OP, RUNTIME: RUNTIME, HARDWARE: HARDWARE}
"""A system event's row and category by its ``trace_event_source``, as the Parquet path sorts them (`_events`)."""


def _copy(b: TraceBuilder, tr: Trace, label: str, keep: np.ndarray, ts: np.ndarray, dur: np.ndarray,
          device: bool = False) -> np.ndarray:
    """Add `tr`'s kept slices at host `ts`, `dur` into `b`; returns the new row of each slice (-1: not added).
    A system event with a ``trace_event_source`` goes to its row's track of that source (its kind and category
    as in `_KIND`, `_CAT`); `device`: every track is a device track."""
    procs = [b.process(f"{label}:{p.pid}", name=p.name, kind=ProcessKind.DEVICE if device else p.kind,
                       sort_index=p.sort_index) for p in tr.processes]
    rows = np.full(len(tr.slices), -1, dtype=np.int64)
    s = tr.slices
    for i in np.flatnonzero(keep).tolist():
        t = tr.tracks[int(s.track[i])]
        args = tr.slice_args(i)
        src = str(args.get("trace_event_source"))
        kind = TrackKind.DEVICE if device else _KIND.get(src, t.kind)
        name = f"{t.name} {src}" if src in _KIND else t.name
        track = b.track(procs[t.process], name, kind, unit=t.unit, sort_index=t.sort_index)
        rows[i] = b.add_slice(track, int(ts[i]), int(dur[i]), tr.slice_name(i), _CAT.get(src, tr.s(int(s.cat[i]))),
                              args or None)
    return rows


def _add_system(b: TraceBuilder, tr: Trace, ops: HostOps | None, own: dict[str, Any]) -> np.ndarray:
    """The system profile's events (host clock); returns its executions' host (start, end), sorted."""
    s = tr.slices
    n = len(s)
    keep = np.ones(n, dtype=bool)
    joined = np.full(n, -1, dtype=np.int64)
    if ops is not None and n:
        fw = np.asarray([tr.slice_args(i).get("trace_event_source") == FRAMEWORK for i in range(n)], dtype=bool)
        idx = np.flatnonzero(fw)
        if len(idx):
            names = sorted({tr.slice_name(int(i)) for i in idx})
            at = {nm: k for k, nm in enumerate(names)}
            name_idx = np.asarray([at[tr.slice_name(int(i))] for i in idx], dtype=np.int64)
            tids = np.full(len(idx), -1, dtype=np.int64)
            hit = ops(tids, names, name_idx, s.ts_ns[idx].astype(np.int64))
            joined[idx] = hit
            keep[idx[hit >= 0]] = False
        own["framework_join"] = {"framework_events": ops.asked, "joined": ops.joined}
    rows = _copy(b, tr, "explorer system", keep, s.ts_ns, s.dur_ns)
    rows = np.where(keep, rows, joined)
    _copy_counters(b, tr, "explorer system", lambda t: t)
    f = tr.flows
    for src, dst in zip(f.src.tolist(), f.dst.tolist()):
        if rows[src] >= 0 and rows[dst] >= 0:
            b.add_flow(int(rows[src]), int(rows[dst]), cat="neuron_explorer", name="flow")
    eid = tr.strings.get(EXECUTION)
    ex = np.flatnonzero(s.name == eid) if eid is not None else np.zeros(0, dtype=np.int64)
    out = np.column_stack([s.ts_ns[ex], s.ts_ns[ex] + s.dur_ns[ex]]).astype(np.int64) if len(ex) else \
        np.zeros((0, 2), dtype=np.int64)
    own["executions"] = len(out)
    return out[np.argsort(out[:, 0], kind="stable")] if len(out) else out


def _copy_counters(b: TraceBuilder, tr: Trace, label: str, to_host: Any) -> None:
    """`tr`'s counters and instants into `b`, their times through `to_host`; only their tracks are made."""
    c, ins = tr.counters, tr.instants
    made: dict[int, int] = {}

    def track(i: int) -> int:
        if i not in made:
            t = tr.tracks[i]
            p = tr.processes[t.process]
            made[i] = b.track(b.process(f"{label}:{p.pid}", name=p.name, kind=p.kind), t.name, t.kind, unit=t.unit)
        return made[i]

    for t, v, tr_i in zip(to_host(c.ts_ns).tolist(), c.value.tolist(), c.track.tolist()):
        b.add_counter(track(tr_i), int(t), float(v))
    for i, t in enumerate(to_host(ins.ts_ns).tolist()):
        b.add_instant(track(int(ins.track[i])), int(t), tr.s(int(ins.name[i])), tr.s(int(ins.cat[i])),
                      tr.instant_args(i) or None)


def _add_device(b: TraceBuilder, tr: Trace, name: str, execs: np.ndarray, warnings: list[str],
                host: bool) -> dict[str, Any]:
    """One device file, placed on the host clock (module docstring); returns how."""
    s = tr.slices
    times = np.concatenate([s.ts_ns, tr.instants.ts_ns, tr.counters.ts_ns]).astype(np.int64)
    if not len(times):
        return {"how": "empty"}
    lo, hi = int(times.min()), int(max(times.max(), (s.ts_ns + s.dur_ns).max() if len(s) else 0))
    clock: DeviceClock | None = None
    if lo < UNIX_NS_MIN and len(execs):
        clock = from_executions(np.asarray([lo]), np.asarray([hi]), execs[:, 0], execs[:, 1])
    if clock is None:
        clock = fallback(None, None, np.asarray([lo]))
    info: dict[str, Any] = {"how": clock.how}
    if clock.how == "executions":
        info["execution"] = int(clock.pair_offset)
    if not clock.placed and host:
        warnings.append(f"{name}: its times are on the device clock and no {EXECUTION} of the system profile "
                        "places them on the host clock: its rows are left out")
        return info
    if clock.how == "unix" and len(execs):
        inside = bool(((execs[:, 0] <= lo) & (execs[:, 1] >= hi)).any())
        info["inside_execution"] = inside
        if not inside:
            warnings.append(f"{name}: its span lies within no {EXECUTION} of the system profile: host and "
                            "device clocks may not line up")
    a, dur = clock.span(s.ts_ns, s.ts_ns + s.dur_ns)
    _copy(b, tr, f"explorer {name}", np.ones(len(s), dtype=bool), a, dur, device=True)
    _copy_counters(b, tr, f"explorer {name}", clock.to_host)
    return info
