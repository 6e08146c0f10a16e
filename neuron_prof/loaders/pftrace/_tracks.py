"""Tracks of a .pftrace without neuron-prof's metadata: from its TrackDescriptors, kinds inferred."""

from __future__ import annotations

from typing import Any

from neuron_prof.loaders.pftrace._decode import text
from neuron_prof.model import TraceBuilder, TrackKind

# Probe track names as the writer shows them -> kinds (for files without our metadata)
_LABEL_KIND = {"compile": TrackKind.COMPILE, "CPU fallback": TrackKind.FALLBACK, "sync": TrackKind.SYNC,
               "collectives": TrackKind.COLLECTIVE, "dtype": TrackKind.DTYPE, "findings": TrackKind.FINDINGS}


def tracks_from_descriptors(b: TraceBuilder, ds: dict[int, Any]) -> dict[int, int]:
    """Processes, threads and custom tracks of the descriptors (by uuid) into `b`; returns uuid -> track row."""
    umap: dict[int, int] = {}
    for d in ds.values():  # processes first: threads and custom tracks hang below them
        if d.HasField("process"):
            b.process(d.process.pid, text(d.process.process_name) or None)
    for u, d in ds.items():
        if d.HasField("process"):
            continue
        if d.HasField("thread"):
            umap[u] = b.thread_track(d.thread.pid, d.thread.tid, text(d.thread.thread_name) or None)
            continue
        pid = _owner_pid(ds, u)
        proc = b.process(pid if pid is not None else "perfetto", None if pid is not None else "Perfetto")
        if d.HasField("counter"):
            bytes_ = d.counter.unit == 3
            kind = TrackKind.MEMORY if bytes_ else TrackKind.COUNTER
            umap[u] = b.track(proc, text(d.name) or f"counter {u}", kind,
                              unit="bytes" if bytes_ else text(d.counter.unit_name))
        elif d.name or u:
            umap[u] = b.track(proc, text(d.name) or f"track {u}", _LABEL_KIND.get(text(d.name), TrackKind.OTHER))
    return umap


def _owner_pid(ds: dict[int, Any], u: int) -> int | None:
    seen = set()
    d = ds.get(u)
    while d is not None and d.uuid not in seen:
        seen.add(d.uuid)
        if d.HasField("process"):
            return int(d.process.pid)
        if d.HasField("thread"):
            return int(d.thread.pid)
        d = ds.get(d.parent_uuid) if d.parent_uuid else None
    return None
