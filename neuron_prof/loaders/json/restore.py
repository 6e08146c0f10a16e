"""Restore what neuron-prof's own JSON export adds under the top-level key `neuron_prof` (schema.META_KEY).

Chrome JSON knows only threads (pid, tid) and counters (pid, name); our model also has probe tracks
without a tid, track and process kinds, units, ranks, metadata and findings. The exporter
(`neuron_prof.exporters.chrome_json`) writes them here; this puts them back so that a trace written and
read again is the same trace: same processes and tracks in the same order, same kinds and names.

Layout (format_version 1):
    {"format_version": 1, "metadata": {...}, "findings": [{...}],
     "processes": [{"pid", "name", "kind", "rank", "sort_index", "labels"}],
     "tracks": [{"pid", "tid" (as written to the file), "counter" (name as loaded, counters only),
                 "name", "kind", "orig_tid", "unit", "sort_index", "synthetic" (drop on load)}]}
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.loaders.json._values import norm_id
from neuron_prof.model import Process, Trace, Track
from neuron_prof.model.order import sorted_unique
from neuron_prof.model.schema import META_KEY, Meta, TrackKind

__all__ = ["restore_own"]

_OWN_META_KEYS = (Meta.SOURCE, Meta.SOURCE_FORMAT, Meta.KINETO, Meta.WARNINGS, Meta.PARTIAL, Meta.CLOCK)
"""Metadata that describes the file just read, not the trace: the loader's values win."""


def restore_own(trace: Trace, own: dict[str, Any], warnings: list[str] | None) -> Trace:
    """`trace` as loaded from a file neuron-prof wrote, with the `neuron_prof` block applied."""
    procs_meta = [p for p in _list(own.get("processes")) if isinstance(p, dict)]
    tracks_meta = [t for t in _list(own.get("tracks")) if isinstance(t, dict)]

    pid_index = {p.pid: i for i, p in enumerate(trace.processes)}
    pmap = np.full(len(trace.processes), -1, dtype=np.int64)
    processes: list[Process] = []
    for pm in procs_meta:
        i = pid_index.get(_nid(pm.get("pid")))
        if i is None or pmap[i] >= 0:
            continue
        old = trace.processes[i]
        pmap[i] = len(processes)
        processes.append(Process(pid=old.pid, name=_str(pm.get("name"), old.name),
                                 kind=_str(pm.get("kind"), old.kind), rank=_int_or_none(pm.get("rank")),
                                 sort_index=_int_or_none(pm.get("sort_index")), labels=_str(pm.get("labels"), "")))
    for i, p in enumerate(trace.processes):
        if pmap[i] < 0:
            pmap[i] = len(processes)
            processes.append(p)

    thread_index: dict[tuple[Any, Any], int] = {}
    counter_index: dict[tuple[Any, str], int] = {}
    for i, t in enumerate(trace.tracks):
        pid = trace.processes[t.process].pid
        if t.is_counter:
            counter_index[(pid, t.name)] = i
        elif t.tid is not None:
            thread_index[(pid, t.tid)] = i
    tmap = np.full(len(trace.tracks), -1, dtype=np.int64)
    drop = np.zeros(len(trace.tracks), dtype=bool)
    tracks: list[Track] = []
    for tm in tracks_meta:
        pid = _nid(tm.get("pid"))
        if isinstance(tm.get("counter"), str):
            i = counter_index.get((pid, tm["counter"]))
        else:
            i = thread_index.get((pid, _nid(tm.get("tid"))))
        if i is None or tmap[i] >= 0 or drop[i]:
            continue
        if tm.get("synthetic"):
            drop[i] = True
            continue
        was = trace.tracks[i]
        kind = _str(tm.get("kind"), was.kind)
        if kind not in TrackKind.ALL:
            kind = was.kind
        orig = tm.get("orig_tid", was.tid)
        tmap[i] = len(tracks)
        tracks.append(Track(process=int(pmap[was.process]), name=_str(tm.get("name"), was.name), kind=kind,
                            tid=None if orig is None else _nid(orig), sort_index=_int_or_none(tm.get("sort_index")),
                            unit=_str(tm.get("unit"), was.unit)))
    # A synthetic track that holds slices (someone edited the file) is kept: its rows carry flows.
    if drop.any() and len(trace.slices):
        keep_slices = np.zeros(len(trace.tracks), dtype=bool)
        keep_slices[sorted_unique(trace.slices.track)] = True
        drop &= ~keep_slices
    for i, t in enumerate(trace.tracks):
        if tmap[i] < 0 and not drop[i]:
            tmap[i] = len(tracks)
            tracks.append(Track(process=int(pmap[t.process]), name=t.name, kind=t.kind, tid=t.tid,
                                sort_index=t.sort_index, unit=t.unit))

    instants = trace.instants
    if drop.any():
        instants = instants.take(np.flatnonzero(~drop[instants.track]))
    # A process that only held dropped tracks (the findings holder of an empty trace) goes too.
    used = np.zeros(len(processes), dtype=bool)
    for t in tracks:
        used[t.process] = True
    synthetic_pids = {_nid(pm.get("pid")) for pm in procs_meta if pm.get("synthetic")}
    if synthetic_pids and not all(used[i] or processes[i].pid not in synthetic_pids for i in range(len(processes))):
        keep = [i for i in range(len(processes)) if used[i] or processes[i].pid not in synthetic_pids]
        renum = {old: new for new, old in enumerate(keep)}
        processes = [processes[i] for i in keep]
        tracks = [Track(process=renum[t.process], name=t.name, kind=t.kind, tid=t.tid, sort_index=t.sort_index,
                        unit=t.unit) for t in tracks]

    def remap(table: Any) -> Any:
        if not len(table):
            return table
        cols = {k: getattr(table, k) for k in table.DTYPES}
        cols["track"] = tmap[cols["track"]].astype(np.int32)
        return type(table)(**cols)

    md = dict(own["metadata"]) if isinstance(own.get("metadata"), dict) else {}
    for k in _OWN_META_KEYS:
        md.pop(k, None)
        if k in trace.metadata:
            md[k] = trace.metadata[k]
    if not warnings:
        md.pop(Meta.WARNINGS, None)
    md.pop(META_KEY, None)
    findings = tuple(f for f in _list(own.get("findings")) if isinstance(f, dict))
    return trace.replace(processes=tuple(processes), tracks=tuple(tracks), slices=remap(trace.slices),
                         instants=remap(instants), counters=remap(trace.counters), metadata=md, findings=findings)


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _nid(v: Any) -> Any:
    try:
        return norm_id(v)
    except Exception:  # noqa: BLE001 - a damaged block must not stop the load
        return None


def _str(v: Any, default: str) -> str:
    return v if isinstance(v, str) else default


def _int_or_none(v: Any) -> int | None:
    return v if type(v) is int else None

