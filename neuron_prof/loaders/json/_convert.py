"""Kineto/Chrome JSON events into the trace model: `Converter` takes parsed chunks of traceEvents (or a range
parsed in another process), makes the processes and tracks, pairs B/E and async events, binds flows, sets the
clock and the metadata (see `kineto_json`, which reads the file and feeds it)."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeGuard

import numpy as np

from neuron_prof.loaders.json._events import Columns, EventColumns
from neuron_prof.loaders.json._flows import SliceIndex, bind_v1, bind_v2, unique_ids
from neuron_prof.loaders.json._pairs import pair_async, pair_begin_end
from neuron_prof.loaders.json._values import as_str, norm_id, us_to_ns
from neuron_prof.model import ROW_WINDOW, FlowTable, TraceBuilder, drop_mapped
from neuron_prof.model.order import sorted_unique
from neuron_prof.model.schema import META_KEY, KinetoCat, Meta, ProcessKind, TrackKind

V1Ends = tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray]
"""Flow v1 endpoints as columns [ph, key id, track, ts_us, bp_e, hint row], then by key id: cat and name string
ids, and the flow id kept (-1: none)."""
UNIX_US_MIN = 1e15
"""Without baseTimeNanoseconds, timestamps above this many µs (2001-09-09) are taken as Unix µs."""


def first_warning(conv: Converter) -> str:
    """The commonest reason an entry of traceEvents was not read, for an error message."""
    w = conv.events.warn.most_common(1)
    return f"{w[0][1]:,} {w[0][0]}" if w else "no 'ph' field"


class Converter:
    """Events chunk by chunk into `builder`'s processes/tracks and columns (see load_kineto_json)."""

    def __init__(self, builder: TraceBuilder, source: str) -> None:
        self.b = builder
        self.source = source
        self.row_base = builder.n_slices
        self.events = EventColumns(builder.strings, self._thread_track, self._counter_track, self._meta,
                                   args_base=len(builder.args))
        self._counter_tracks: dict[tuple[Any, str], int] = {}

    def add(self, chunk: list[Any]) -> None:
        self.events.add(chunk)

    def merge_part(self, part: dict[str, Any]) -> None:
        """A range parsed in another process (see _json_parallel): its tracks in the order they came into
        being, its metadata events, then its columns."""
        threads: list[int] = []
        counters: list[int] = []
        for entry in part["log"]:
            if entry[0] == "t":
                threads.append(self._thread_track(entry[1], entry[2]))
            elif entry[0] == "c":
                counters.append(self._counter_track(entry[1], entry[2]))
            else:
                self.b.process(entry[1])
        n_meta = self.events.n_meta
        for e in part["metas"]:
            self._meta(e)
        self.events.n_meta = n_meta
        self.events.merge(part, np.array(threads, dtype=np.int32), np.array(counters, dtype=np.int32))

    def n_events_read(self) -> int:
        e = self.events
        return (e.n_slices + sum(len(c[0]) for c in e._i) + len(e._c_ts) + e.n_flow_ends + len(e.begin_end)
                + len(e.asyncs) + e.n_meta)

    # ---- tracks -------------------------------------------------------------------------------------
    def _thread_track(self, pid: Any, tid: Any) -> int:
        return self.b.thread_track(pid, tid)

    def _counter_track(self, pid: Any, name: str) -> int:
        key = (pid, name)
        t = self._counter_tracks.get(key)
        if t is None:
            t = self._counter_tracks[key] = self.b.track(self.b.process(pid), name, TrackKind.COUNTER)
        return t

    def _meta(self, e: dict[str, Any]) -> None:
        self.events.n_meta += 1
        name, args = e.get("name"), e.get("args")
        if not isinstance(args, dict):
            self.events.warn["metadata (M) events without args skipped"] += 1
            return
        pid = norm_id(e.get("pid", 0))
        if name == "process_name":
            self.b.process(pid, name=as_str(args.get("name")))
        elif name == "process_labels":
            self.b.process(pid, labels=as_str(args.get("labels")))
        elif name == "process_sort_index":
            if _is_int(args.get("sort_index")):
                self.b.process(pid, sort_index=int(args["sort_index"]))
        elif name == "thread_name":
            self.b.thread_track(pid, norm_id(e.get("tid", 0)), thread_name=as_str(args.get("name")))
        elif name == "thread_sort_index":
            if _is_int(args.get("sort_index")):
                self.b.thread_track(pid, norm_id(e.get("tid", 0)), sort_index=int(args["sort_index"]))
        # other M events (process_uptime_seconds, ...) carry nothing the model keeps

    # ---- finish -------------------------------------------------------------------------------------
    def finish(self, top: dict[str, Any], warnings: list[str]) -> tuple[Columns, FlowTable]:
        ev = self.events
        base, clock = self._clock(top)
        self._pair()
        args_blob = ev.args_later()  # 100s of MB joined beside the rest
        cols = ev.finish(base)
        flows = self._flows(cols, base)
        self.finish_meta(cols, top, clock, warnings)
        cols.args_blob = args_blob()
        return cols, flows

    def finish_meta(self, cols: Any, top: dict[str, Any], clock: str, warnings: list[str]) -> None:
        """Track kinds from the finished columns (`cols.s_cat`, `cols.s_track`), then the metadata."""
        self._kinds(cols)
        self._metadata(top, clock, warnings + [f"{n:,} {w}" for w, n in self.events.warn.items() if n])

    def _clock(self, top: dict[str, Any]) -> tuple[int, str]:
        return clock_of(top, [c[0][:1] for c in self.events._s[:1] + self.events._i[:1]])

    def _pair(self) -> None:
        """B/E and async b/e/n events become slices (and instants) once every chunk is in."""
        ev = self.events
        if not (ev.begin_end or ev.asyncs):
            return
        end = self._end_us()
        if ev.begin_end:
            ev.add_slices_us(pair_begin_end(ev.begin_end, end, ev.warn))
            ev.begin_end = []
        if ev.asyncs:
            slices, instants = pair_async(ev.asyncs, end, self._async_track, ev.warn)
            ev.add_slices_us(slices)
            ev.add_instants_us(instants)
            ev.asyncs = []

    def _async_track(self, pid: Any, name: Any) -> int:
        return self.b.track(self.b.process(pid), as_str(name), TrackKind.ASYNC)

    def _end_us(self) -> float:
        """Latest time (µs) any event reaches: where unclosed spans are closed."""
        ev = self.events
        ends = [float((c[0] + c[1]).max()) for c in ev._s if len(c[0])]
        ends += [float(c[0].max()) for c in ev._i if len(c[0])]
        ends += [max(r[0] for r in ev.begin_end)] if ev.begin_end else []
        ends += [max(r[0] for r in ev.asyncs)] if ev.asyncs else []
        return max(ends) if ends else 0.0

    def v1_ends(self) -> V1Ends | None:
        """The v1 flow endpoints gathered (None: none) and, by key id, their cat, name and wanted flow id."""
        ev = self.events
        if not ev.n_flow_ends:
            return None
        ends, keys = ev.flow_ends()
        return (ends, ev.sids([k[0] for k in keys]), ev.sids([k[1] for k in keys]),
                wanted_ids([k[2] for k in keys]))

    def _flows(self, cols: Columns, base: int) -> FlowTable:
        """Flows bound to slice rows: v1 endpoints and v2 bind ids (the streamed load binds them in windows:
        `stream._Ingest._flows`)."""
        parts = []
        unbound = 0
        v1 = self.v1_ends()
        if v1 is not None:
            (ph, kid, track, ts_us, bp, hint), cat_of, name_of, want = v1
            index = SliceIndex(cols.s_ts, cols.s_dur, cols.s_track)
            hint = np.where((hint >= 0) & (hint < 2**62), hint, -1)  # rows of this file, as ours are
            fl, unbound = bind_v1(ph, kid, track, us_to_ns(ts_us, base), bp, hint, cols.s_ts, cols.s_dur,
                                  cols.s_track, index)
            del index
            parts.append((fl.src, fl.dst, want[fl.key], cat_of[fl.key], name_of[fl.key]))
        v2 = self.v2_arrows(cols.s_ts)
        if v2 is not None:
            parts.append(v2)
        self.count_unbound(unbound)
        if not parts:
            return _empty_flows()
        src = np.concatenate([p[0] for p in parts]) + self.row_base
        dst = np.concatenate([p[1] for p in parts]) + self.row_base
        ids = unique_ids(np.concatenate([p[2] for p in parts]), np.asarray(self.b.f_id, dtype=np.int64))
        return FlowTable(src=src, dst=dst, flow_id=ids, cat=np.concatenate([p[3] for p in parts]),
                         name=np.concatenate([p[4] for p in parts]))

    def v2_arrows(self, s_ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """The v2 arrows (bind ids) as (src, dst, wanted id, cat, name) columns, rows of this file; None: none."""
        ev = self.events
        if not ev.v2:
            return None
        fl = bind_v2(ev.v2, s_ts)
        ev.v2 = []
        n = len(fl.src)
        flow = self.b.strings.intern("flow")
        return fl.src, fl.dst, np.full(n, -1, np.int64), np.full(n, flow, np.int32), np.full(n, flow, np.int32)

    def count_unbound(self, unbound: int) -> None:
        """Say how many flow endpoints bound to no slice (their arrows dropped)."""
        if unbound:
            self.events.warn["flow events not bound to any slice (arrow dropped)"] += unbound

    def _kinds(self, cols: Columns) -> None:
        """Threads running device activity (kernels, memcpy, ...) are DEVICE tracks in DEVICE processes."""
        dev = self.b.strings
        ids = [i for i in (dev.get(c) for c in KinetoCat.DEVICE_CATS) if i is not None]
        if not ids:
            return
        found = [np.zeros(0, np.int32)]
        for a in range(0, len(cols.s_cat), ROW_WINDOW):  # a window at a time: the columns may be mapped
            z = a + ROW_WINDOW
            found.append(sorted_unique(cols.s_track[a:z][np.isin(cols.s_cat[a:z], ids)]))
            drop_mapped(cols.s_track)
            drop_mapped(cols.s_cat)
        for t in sorted_unique(np.concatenate(found)).tolist():
            tr = self.b.tracks[t]
            if tr.kind == TrackKind.THREAD:
                self.b.set_track(t, kind=TrackKind.DEVICE)
            p = self.b.processes[tr.process]
            if p.kind != ProcessKind.DEVICE:
                self.b.processes[tr.process] = dataclasses.replace(p, kind=ProcessKind.DEVICE)

    def _metadata(self, top: dict[str, Any], clock: str, warnings: list[str]) -> None:
        md = self.b.metadata
        md.setdefault(Meta.SOURCE, self.source)
        md.setdefault(Meta.SOURCE_FORMAT, "kineto_json")
        md[Meta.CLOCK] = clock if md.get(Meta.CLOCK) in (None, clock) else "relative"
        # The base is spent on the Unix-ns times; an exporter picks its own.
        kineto = {k: v for k, v in top.items() if k not in (META_KEY, "baseTimeNanoseconds")}
        if kineto:
            md.setdefault(Meta.KINETO, {}).update(kineto)
        dist = top.get("distributedInfo")
        if isinstance(dist, dict):
            if _is_int(dist.get("rank")):
                md[Meta.RANK] = int(dist["rank"])
                for i, p in enumerate(self.b.processes):
                    if p.kind == ProcessKind.HOST and p.rank is None and not isinstance(p.pid, str):
                        self.b.processes[i] = dataclasses.replace(p, rank=md[Meta.RANK])
            if _is_int(dist.get("world_size")):
                md[Meta.WORLD_SIZE] = int(dist["world_size"])
        if warnings:
            md.setdefault(Meta.WARNINGS, []).extend(warnings)


def clock_of(top: dict[str, Any], firsts: list[np.ndarray]) -> tuple[int, str]:
    """(base ns, clock) from `baseTimeNanoseconds`, else from the first slice's and instant's µs (`firsts`)."""
    base = top.get("baseTimeNanoseconds")
    if _is_int(base) or (isinstance(base, float) and abs(base) < 9e18):
        return int(base), "unix"
    first = float(np.concatenate(firsts).max()) if any(len(f) for f in firsts) else 0.0
    return 0, "unix" if first > UNIX_US_MIN else "relative"


def wanted_ids(ids: list[Any]) -> np.ndarray:
    """Flow ids kept as ids: ints in [0, 2**62), else -1 (a string, None, a float...)."""
    if set(map(type, ids)) <= {int}:
        try:
            a = np.array(ids, dtype=np.int64)
            return np.where((a >= 0) & (a < 2**62), a, -1)
        except OverflowError:
            pass
    return np.array([i if type(i) is int and 0 <= i < 2**62 else -1 for i in ids], dtype=np.int64)


def _is_int(v: Any) -> TypeGuard[int]:
    return type(v) is int


def _empty_flows() -> FlowTable:
    z = np.zeros(0, np.int64)
    return FlowTable(src=z, dst=z, flow_id=z, cat=np.zeros(0, np.int32), name=np.zeros(0, np.int32))
