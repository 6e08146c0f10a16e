"""Neuron Explorer ``SystemProfileEvents`` into tracks, slices and flows, a column at a time.

Source: shared/design/neuron-explorer-facts.md, "SystemProfileEvents" and "Default grouping in Explorer".
Rows are grouped the way Explorer groups them, by ``trace_event_source``:

* ``framework`` (the Python app): a dispatch event on its host thread (cat ``cpu_op``: the framework's own
  op); one with a ``framework_stream_id`` is a ``privateuse1_driver`` event, on a track per driver stream;
* ``neuron_rt`` (the runtime on the CPU): a track per logical core ``nc_idx`` in the host process;
* ``neuron_hw`` (the device): device process ``neuron:<nc>`` per logical core ``nc_idx`` (the one the
  device-profile tables of that core join), a DEVICE track ``neuron:<nc> executions`` (``nc_exec_running`` = a
  NEFF execution); with several physical cores in a logical core (LNC2; ``pcore_idx`` is the physical core
  within the NeuronDevice here) a track per physical core, ``neuron:<nc> pcore <p> executions``.

Host/device copies are the runtime's ``dmem_buf_copyin`` (host to device) / ``dmem_buf_copyout`` (device to
host) events (schema enum ``MemoryBandwidthDirection``): kept with their names, linked like executions.

``flow_id`` (a list of str-encoded ints) links a framework dispatch to its runtime execution: a flow goes from
the first event of an id (in source order framework → driver → neuron_rt → neuron_hw, then by time) to each
other event sharing it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuron_prof.loaders.explorer._tables import Tables
from neuron_prof.model import Cat, KinetoCat, ProcessKind, TraceBuilder, TrackKind
from neuron_prof.model.order import searchsorted, sorted_unique

TABLE = "SystemProfileEvents"
FRAMEWORK, RUNTIME, HARDWARE = "framework", "neuron_rt", "neuron_hw"
DEVICE_SORT = 1000
RING_EVENTS = 1_000_000
"""The runtime keeps this many system-trace events per NeuronCore by default and overwrites the oldest."""


def spec(pa: Any) -> dict[str, Any]:
    """Documented columns read from SystemProfileEvents (field: type; times in ns)."""
    i64, s = pa.int64(), pa.string()
    return {"id": i64, "name": s, "start_ts": i64, "end_ts": i64, "duration_ns": i64, "trace_event_source": s,
            "instance_id": s, "process_id": i64, "thread_id": i64, "nc_idx": i64, "pcore_idx": i64,
            "worker_gid": i64, "flow_id": pa.list_(s), "framework_stream_id": s}


EXECUTION = "nc_exec_running"
"""A NEFF execution on a core (hardware event)."""
COPY_IN, COPY_OUT = "dmem_buf_copyin", "dmem_buf_copyout"
"""Host-to-device and device-to-host copies (MemoryBandwidthDirection: host_to_device, device_to_host)."""


def device_process(b: TraceBuilder, nc: int, pid: int | None = None) -> int:
    """Device process ``neuron:<logical core>`` (``neuron:<pid>:<nc>`` when a profile holds several processes:
    ``nc_idx`` is process-local), shared by the hardware events and the device-profile tables of that core."""
    key = f"neuron:{nc}" if pid is None else f"neuron:{pid}:{nc}"
    return b.process(key, name=key, kind=ProcessKind.DEVICE, sort_index=DEVICE_SORT + nc)


@dataclass
class Executions:
    """``nc_exec_running`` rows of the system profile per (process id, logical core): the device profile's
    anchors (`_explorer_clock`). Starts sorted; `row` is the slice row in the builder (-1: not added)."""

    by_core: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)
    multi_process: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    unlinked: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    """(slice row, flow id, start ns) of the first runtime event of each flow id no framework event shares:
    a runtime call the profile does not tie to a framework op (the framework mapping may)."""

    def of(self, pid: int | None, nc: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The executions of a core: of process `pid`, else of the only process that has that core."""
        if pid is not None:
            return self.by_core.get((pid, nc))
        hits = [v for (p, c), v in self.by_core.items() if c == nc]
        return hits[0] if len(hits) == 1 else None


HostRow = Callable[[np.ndarray, list[str], np.ndarray, np.ndarray], np.ndarray]
"""(thread ids, distinct names, each event's index into them, start ns) of the framework events -> for each,
the row of the host op already in the builder that is that event, or -1 (one call for all of them)."""


def add_system_events(b: TraceBuilder, tables: Tables, warnings: list[str],
                      host_row: HostRow | None = None) -> Executions:
    """Slices and flows from SystemProfileEvents, a column at a time; returns the executions per core (and the
    event counts per source).

    With `host_row` (the builder already holds the framework's ops, from its own torch.profiler trace),
    framework events (dispatch and ``privateuse1_driver``) it finds are not added again: the flows start at
    the host op `host_row` names; those it does not find are added as in a bare profile.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if not tables.need("system timeline", TABLE, ("name", "start_ts", "trace_event_source")):
        return Executions()
    t = tables.table(TABLE, spec(pa))
    if t is None or not t.num_rows:
        return Executions()
    col = lambda c, fill=0: t.column(c).fill_null(fill).to_numpy(zero_copy_only=False)  # noqa: E731
    start, end, dur = col("start_ts"), col("end_ts", -1), col("duration_ns", -1)
    dur = np.where(dur >= 0, dur, np.where(end >= 0, np.maximum(end - start, 0), 0))
    src_names, src = _codes(t.column("trace_event_source").fill_null(""))
    streams, stream = _codes(t.column("framework_stream_id").fill_null(""))
    pid, tid, nc, pcore = col("process_id"), col("thread_id"), col("nc_idx"), col("pcore_idx")
    code = {n: i for i, n in enumerate(src_names)}
    fw, rt = code.get(FRAMEWORK, -1), code.get(RUNTIME, -1)
    kind = np.full(len(src), 3, dtype=np.int64)  # 0 framework, 1 driver, 2 runtime, 3 hardware (and unknown)
    kind[src == fw] = 0
    kind[(src == fw) & (np.asarray(streams, dtype=object)[stream] != "")] = 1
    kind[src == rt] = 2
    names, name_idx = _codes(t.column("name").fill_null(""))
    row_of = np.full(len(kind), -1, dtype=np.int64)
    if host_row is not None:  # framework events (dispatch and driver) the host trace already holds
        fws = np.flatnonzero(kind <= 1)
        if len(fws):
            row_of[fws] = host_row(tid[fws], names, name_idx[fws], start[fws])
    keep = row_of < 0  # joined rows are not added again; a framework event the host lacks is added
    row_of[keep] = b.n_slices + np.arange(int(keep.sum()))
    k = np.flatnonzero(keep)
    nc = np.where(t.column("nc_idx").is_null().to_numpy(zero_copy_only=False), pcore, nc)  # hardware: its core
    multi = len(sorted_unique(pid[kind == 3])) > 1
    if len(k):
        inst = t.column("instance_id").fill_null("").to_numpy(zero_copy_only=False)
        tracks, cats = _tracks(b, inst[k], kind[k], pid[k], tid[k], nc[k], pcore[k], stream[k], streams, multi)
        name_ids = np.asarray([b.strings.intern(n) for n in names], dtype=np.int64)
        b.s_ts.extend(start[k].tolist())
        b.s_dur.extend(dur[k].tolist())
        b.s_track.extend(tracks.tolist())
        b.s_name.extend(name_ids[name_idx[k]].tolist())
        b.s_cat.extend(cats.tolist())
        kept = t if len(k) == len(kind) else t.take(pa.array(k))
        b.s_args.extend(b.args.add_raw(raw) for raw in _args_json(kept, pc, pa))
    n_flows = len(b.f_src)
    unlinked = _flows(b, t, row_of, kind, start, warnings)
    _hardware_links(b, kind, nc, start, dur, row_of, set(b.f_dst[n_flows:]))
    warnings += ring_full(nc[kind >= 2])
    ex = Executions(multi_process=multi, unlinked=unlinked)
    ex.counts = {str(s) or "unknown": int(c) for s, c in zip(src_names, np.bincount(src, minlength=len(src_names)))
                 if c}
    e = np.flatnonzero((kind == 3) & (name_idx == (names.index(EXECUTION) if EXECUTION in names else -1)))
    for p, c in sorted({(int(x), int(y)) for x, y in zip(pid[e].tolist(), nc[e].tolist())}):
        r = e[(pid[e] == p) & (nc[e] == c)]
        r = r[np.argsort(start[r], kind="stable")]
        ex.by_core[(p, c)] = (start[r], start[r] + dur[r], row_of[r])
    return ex


def _tracks(b: TraceBuilder, inst: np.ndarray, kind: np.ndarray, pid: np.ndarray, tid: np.ndarray, nc: np.ndarray,
            pcore: np.ndarray, stream: np.ndarray, streams: list[str], multi: bool
            ) -> tuple[np.ndarray, np.ndarray]:
    """Each row's track and category: one key (kind, pid, thread/stream/core) per track; keys are few."""
    a = pid
    bkey = np.select([kind == 0, kind == 1, kind == 2, kind == 3], [tid, stream, nc, nc], default=0)
    hw = kind == 3
    pc_of: dict[tuple[int, int], set[int]] = {}
    for p, c, q in zip(pid[hw].tolist(), nc[hw].tolist(), pcore[hw].tolist()):
        pc_of.setdefault((p, c), set()).add(q)
    split = {k for k, v in pc_of.items() if len(v) > 1}  # LNC2: a track per physical core
    if split:
        lnc2 = hw & np.asarray([(int(p), int(c)) in split for p, c in zip(pid, nc)], dtype=bool)
        bkey = np.where(lnc2, nc * 100_000 + pcore + 1, bkey)
    _, a_code = np.unique(a, return_inverse=True)
    _, b_code = np.unique(bkey, return_inverse=True)
    nb = int(b_code.max()) + 1
    _, first, inv = np.unique((kind * (int(a_code.max()) + 1) + a_code) * nb + b_code, return_index=True,
                              return_inverse=True)
    tracks = np.empty(len(first), dtype=np.int64)
    cats = np.empty(len(first), dtype=np.int64)
    kinds = (FRAMEWORK, "driver", RUNTIME, HARDWARE)
    cat_of = {FRAMEWORK: KinetoCat.CPU_OP, "driver": KinetoCat.PRIVATEUSE1_DRIVER, RUNTIME: RUNTIME,
              HARDWARE: HARDWARE}
    for j, f in enumerate(first.tolist()):
        kd, ka, kb = int(kind[f]), int(a[f]), int(bkey[f])
        name = kinds[kd]
        if kd != 3:  # "i-0abc pid 4242": Explorer's instance and pid
            who = inst[f]
            b.process(ka, name=f"{who} pid {ka}" if who else f"pid {ka}")
        tracks[j] = _track(b, (name, ka, streams[kb] if kd == 1 else kb), multi)
        cats[j] = b.strings.intern(cat_of[name])
    return tracks[inv], cats[inv]


def ring_full(nc: np.ndarray, limit: int | None = None) -> list[str]:
    """A warning per logical core whose runtime and hardware events filled the runtime's ring buffer (default
    RING_EVENTS): the oldest were overwritten, so the capture lost its start (neuron-explorer-facts, "Capture")."""
    limit = RING_EVENTS if limit is None else limit
    cores, counts = np.unique(nc, return_counts=True)
    return [f"Neuron Explorer: NeuronCore {int(c)} holds {int(k):,} runtime events, the runtime's ring buffer "
            f"size (NEURON_RT_INSPECT_SYS_TRACE_MAX_EVENTS_PER_NC): the oldest were overwritten, so the capture "
            f"lost its start; capture fewer steps or raise the limit" for c, k in zip(cores, counts) if k >= limit]


def _codes(arr: Any) -> tuple[list[str], np.ndarray]:
    """Distinct values of a string column and each row's index into them (dictionary encoding)."""
    import pyarrow.compute as pc

    d = pc.dictionary_encode(arr).combine_chunks()
    return [str(x) for x in d.dictionary.to_pylist()], d.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def _args_json(t: Any, pc: Any, pa: Any) -> list[bytes]:
    """Each row's args as a JSON object (``id``, ``nc_idx``, ``pcore_idx``, ``worker_gid``), built by pyarrow."""
    parts = []
    for c in ("id", "nc_idx", "pcore_idx", "worker_gid"):
        v = pc.cast(t.column(c), pa.string())
        parts.append(pc.fill_null(pc.binary_join_element_wise(f'"{c}":', v, ",", ""), ""))  # null: no key
    body = pc.utf8_rtrim(pc.binary_join_element_wise(*parts, ""), characters=",")
    return [s.encode() for s in pc.binary_join_element_wise("{", body, "}", "").to_pylist()]


def _track(b: TraceBuilder, key: tuple[Any, ...], multi: bool = False) -> int:
    kind = key[0]
    if kind == HARDWARE:  # key[2]: the logical core, or core * 100000 + physical core + 1 (LNC2)
        nc, pcore = (key[2] // 100_000, key[2] % 100_000 - 1) if key[2] >= 100_000 else (key[2], None)
        p = device_process(b, nc, key[1] if multi else None)
        label = b.processes[p].name
        name = f"{label} executions" if pcore is None else f"{label} pcore {pcore} executions"
        return b.track(p, name, TrackKind.DEVICE, sort_index=0 if pcore is None else pcore)
    p = b.process(key[1], kind=ProcessKind.HOST)
    if kind == FRAMEWORK:
        return b.thread_track(key[1], key[2])
    if kind == "driver":
        return b.track(p, f"PrivateUse1 driver stream {key[2]}", TrackKind.OTHER, sort_index=50)
    return b.track(p, f"neuron_rt nc {key[2]}", TrackKind.OTHER, sort_index=60 + key[2])


def _flows(b: TraceBuilder, t: Any, row_of: np.ndarray, kind: np.ndarray, start: np.ndarray,
           warnings: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A flow from the first event of each flow id (the framework dispatch, else the earliest runtime or
    hardware event) to every other event sharing it; events with no row (`row_of` -1) are left out. Returns
    (row, flow id, start) of the runtime event heading each flow id no framework event shares."""
    import pyarrow.compute as pc

    none = (np.zeros(0, dtype=np.int64),) * 3
    lists = t.column("flow_id").combine_chunks()
    flat = pc.list_flatten(lists)
    if not len(flat):
        return none
    rows = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    text = pc.utf8_trim_whitespace(flat)
    ok = pc.fill_null(pc.match_substring_regex(text, r"^-?[0-9]{1,18}$"), False)
    bad = len(ok) - pc.sum(ok).as_py() if len(ok) else 0
    if bad:
        warnings.append(f"Neuron Explorer: {bad} flow ids are not integers; those links are left out")
    keep = ok.to_numpy(zero_copy_only=False)
    rows, ids = rows[keep], pc.cast(pc.filter(text, ok), "int64").to_numpy(zero_copy_only=False)
    # in each flow: framework dispatch, its driver event, the runtime execution, the hardware; then by time
    o = np.lexsort((start[rows], kind[rows], ids))
    rows, ids = rows[o], ids[o]
    off = max(b.f_id, default=0)  # after the host trace's own flow ids (Kineto's restart at 1 too)
    head = np.r_[True, ids[1:] != ids[:-1]]
    first = rows[np.maximum.accumulate(np.where(head, np.arange(len(ids)), 0))]
    src, dst = row_of[first], row_of[rows]
    m = ~head & (src >= 0) & (dst >= 0) & (src != dst)
    b.f_src.extend(src[m].tolist())
    b.f_dst.extend(dst[m].tolist())
    b.f_id.extend((ids[m] + off).tolist())
    b.f_cat.extend([b.strings.intern(Cat.DEVICE)] * int(m.sum()))
    b.f_name.extend([b.strings.intern("launch")] * int(m.sum()))
    lone = head & (kind[rows] == 2) & (row_of[rows] >= 0)
    return row_of[rows[lone]], ids[lone], start[rows[lone]]


_LOOK_BACK = 4
"""Runtime events tried, latest first, for the one holding a hardware event."""


def _hardware_links(b: TraceBuilder, kind: np.ndarray, nc: np.ndarray, start: np.ndarray, dur: np.ndarray,
                    row_of: np.ndarray, linked: set[int]) -> None:
    """A flow from the runtime event that holds each hardware event no flow id reaches (same logical core
    ``nc_idx``, of the runtime events starting at or before it the latest still running): the NEFF execution
    ``nc_exec_running`` inside the ``nrt_execute`` that ran it, so host op → runtime → device is one chain."""
    rt = np.flatnonzero((kind == 2) & (row_of >= 0))
    hw = np.flatnonzero((kind == 3) & (row_of >= 0))
    hw = hw[~np.isin(row_of[hw], np.fromiter(linked, dtype=np.int64, count=len(linked)))]
    if not len(rt) or not len(hw):
        return
    src_all, dst_all = [], []
    for c in sorted_unique(nc[hw]).tolist():
        r = rt[nc[rt] == c]
        r = r[np.argsort(start[r], kind="stable")]
        h = hw[nc[hw] == c]
        j = searchsorted(start[r], start[h], "right") - 1
        got = np.full(len(h), -1, dtype=np.int64)
        for _ in range(_LOOK_BACK):  # a short runtime call (a tensor write) may start inside the execution
            open_ = (got < 0) & (j >= 0)
            jj = np.maximum(j, 0)
            held = open_ & (start[r[jj]] + dur[r[jj]] >= start[h])
            got[held] = r[jj[held]]
            j = np.where(open_ & ~held, j - 1, -1)
        m = got >= 0
        src_all.append(row_of[got[m]])
        dst_all.append(row_of[h[m]])
    src, dst = np.concatenate(src_all), np.concatenate(dst_all)
    if not len(src):
        return
    off = max(b.f_id, default=0) + 1
    b.f_src.extend(src.tolist())
    b.f_dst.extend(dst.tolist())
    b.f_id.extend(range(off, off + len(src)))
    b.f_cat.extend([b.strings.intern(Cat.DEVICE)] * len(src))
    b.f_name.extend([b.strings.intern("execute")] * len(src))
