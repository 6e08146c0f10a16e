"""Neuron Explorer ``SystemProfileEvents`` into tracks, slices and flows, a column at a time.

Source: shared/design/neuron-explorer-facts.md, "SystemProfileEvents" and "Default grouping in Explorer".
Rows are grouped the way Explorer groups them, by ``trace_event_source``:

* ``framework`` (the Python app): a dispatch event on its host thread (cat ``cpu_op``: the framework's own
  op); one with a ``framework_stream_id`` is a ``privateuse1_driver`` event, on a track per driver stream;
* ``neuron_rt`` (the runtime on the CPU): a track per logical core ``nc_idx`` in the host process;
* ``neuron_hw`` (the device): a DEVICE track per physical core ``pcore_idx`` (``nc_exec_running`` = a NEFF
  execution), in device process ``neuron:<pcore>``.

``flow_id`` (a list of str-encoded ints) links a framework dispatch to its runtime execution: the rows sharing
an id are chained in source order (framework → neuron_rt → neuron_hw), then by start time.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from neuron_prof.loaders._explorer_tables import Tables
from neuron_prof.model import Cat, KinetoCat, ProcessKind, TraceBuilder, TrackKind

TABLE = "SystemProfileEvents"
FRAMEWORK, RUNTIME, HARDWARE = "framework", "neuron_rt", "neuron_hw"
_ORDER = {FRAMEWORK: 0, RUNTIME: 1, HARDWARE: 2}
DEVICE_SORT = 1000


def spec(pa: Any) -> dict[str, Any]:
    """Documented columns read from SystemProfileEvents (field: type; times in ns)."""
    i64, s = pa.int64(), pa.string()
    return {"id": i64, "name": s, "start_ts": i64, "end_ts": i64, "duration_ns": i64, "trace_event_source": s,
            "instance_id": s, "process_id": i64, "thread_id": i64, "nc_idx": i64, "pcore_idx": i64,
            "worker_gid": i64, "flow_id": pa.list_(s), "framework_stream_id": s}


def device_process(b: TraceBuilder, pcore: int) -> int:
    """Device process ``neuron:<physical core>`` (shared by the hardware events and the device-profile tables)."""
    pid = f"neuron:{pcore}"
    return b.process(pid, name=pid, kind=ProcessKind.DEVICE, sort_index=DEVICE_SORT + pcore)


def add_system_events(b: TraceBuilder, tables: Tables, warnings: list[str]) -> dict[str, int]:
    """Slices and flows from SystemProfileEvents; returns counts per source for the metadata."""
    import pyarrow as pa

    t = tables.table(TABLE, spec(pa), required=("name", "start_ts", "trace_event_source"))
    if t is None or not t.num_rows:
        return {}
    n = t.num_rows
    col = lambda c, fill=0: t.column(c).fill_null(fill).to_numpy(zero_copy_only=False)  # noqa: E731
    start, end, dur = col("start_ts"), col("end_ts", -1), col("duration_ns", -1)
    dur = np.where(dur >= 0, dur, np.where(end >= 0, np.maximum(end - start, 0), 0))
    source = np.asarray(t.column("trace_event_source").fill_null("").to_pylist(), dtype=object)
    stream = t.column("framework_stream_id").to_pylist()
    pid, tid = col("process_id"), col("thread_id")
    nc, pcore = col("nc_idx"), col("pcore_idx")
    track = np.full(n, -1, dtype=np.int64)
    counts: dict[str, int] = {}
    keys: dict[tuple[Any, ...], int] = {}
    named: set[int] = set()
    inst = t.column("instance_id").to_pylist()
    for i in range(n):  # one dict lookup per row; tracks are few
        src = source[i]
        if src == FRAMEWORK and stream[i]:
            key: tuple[Any, ...] = ("driver", int(pid[i]), stream[i])
        elif src == FRAMEWORK:
            key = (FRAMEWORK, int(pid[i]), int(tid[i]))
        elif src == RUNTIME:
            key = (RUNTIME, int(pid[i]), int(nc[i]))
        else:
            key = (HARDWARE, int(pcore[i]))
        tr = keys.get(key)
        if tr is None:
            if key[0] != HARDWARE and key[1] not in named:  # "i-0abc pid 4242": Explorer's instance and pid
                named.add(key[1])
                b.process(key[1], name=f"{inst[i]} pid {key[1]}" if inst[i] else f"pid {key[1]}")
            tr = keys[key] = _track(b, key)
        track[i] = tr
        counts[src or "unknown"] = counts.get(src or "unknown", 0) + 1
    cat_of = {FRAMEWORK: KinetoCat.CPU_OP, "driver": KinetoCat.PRIVATEUSE1_DRIVER, RUNTIME: RUNTIME,
              HARDWARE: HARDWARE}
    track_cat = {tr: b.strings.intern(cat_of.get(k[0], HARDWARE)) for k, tr in keys.items()}
    cat = np.asarray([track_cat[x] for x in track.tolist()], dtype=np.int64)
    names = t.column("name").fill_null("").to_numpy(zero_copy_only=False)
    uniq, inv = np.unique(names.astype(str), return_inverse=True)
    ids = np.asarray([b.strings.intern(s) for s in uniq.tolist()], dtype=np.int64)[inv]
    base = b.n_slices
    ev_id, wg = t.column("id").to_pylist(), t.column("worker_gid").to_pylist()
    for i in range(n):
        a = {"id": ev_id[i], "nc_idx": int(nc[i]), "pcore_idx": int(pcore[i]), "worker_gid": wg[i],
             "source": source[i], "stream": stream[i]}
        b.add_slice_ids(int(track[i]), int(start[i]), int(dur[i]), int(ids[i]), int(cat[i]),
                        b.args.add_raw(orjson.dumps({k: v for k, v in a.items() if v is not None})))
    _flows(b, t, base, source, start, warnings)
    return counts


def _track(b: TraceBuilder, key: tuple[Any, ...]) -> int:
    kind = key[0]
    if kind == HARDWARE:
        p = device_process(b, key[1])
        return b.track(p, f"neuron:{key[1]} executions", TrackKind.DEVICE, sort_index=0)
    p = b.process(key[1], kind=ProcessKind.HOST)
    if kind == FRAMEWORK:
        return b.thread_track(key[1], key[2])
    if kind == "driver":
        return b.track(p, f"PrivateUse1 driver stream {key[2]}", TrackKind.OTHER, sort_index=50)
    return b.track(p, f"neuron_rt nc {key[2]}", TrackKind.OTHER, sort_index=60 + key[2])


def _flows(b: TraceBuilder, t: Any, base: int, source: np.ndarray, start: np.ndarray,
           warnings: list[str]) -> None:
    import pyarrow.compute as pc

    lists = t.column("flow_id").combine_chunks()
    flat = pc.list_flatten(lists)
    if not len(flat):
        return
    rows = pc.list_parent_indices(lists).to_numpy()
    text = np.asarray(flat.to_pylist(), dtype=object)
    ok = np.asarray([isinstance(x, str) and x.strip().lstrip("-").isdigit() for x in text], dtype=bool)
    if not ok.all():
        warnings.append(f"Neuron Explorer: {int((~ok).sum())} flow ids are not integers; those links are left out")
    rows, ids = rows[ok], np.asarray([int(x) for x in text[ok]], dtype=np.int64)
    order_src = np.asarray([_ORDER.get(s, 3) for s in source[rows].tolist()], dtype=np.int64)
    o = np.lexsort((start[rows], order_src, ids))
    rows, ids = rows[o], ids[o]
    same = ids[1:] == ids[:-1]
    for a, z, f in zip(rows[:-1][same].tolist(), rows[1:][same].tolist(), ids[1:][same].tolist()):
        if a != z:
            b.add_flow(base + a, base + z, flow_id=f, cat=Cat.DEVICE, name="launch")
