"""Chrome/Kineto JSON (`.json`, `.json.gz`) into the trace model.

    trace = load_kineto_json("trace.json.gz")      # a finished Trace, or TraceLoadError
    parse_kineto_into(builder, data, source)       # a parsed Kineto dict into a TraceBuilder (capture)

Reads every phase Perfetto reads: X, B/E (paired per thread), i/I/R instants (Kineto `[memory]` too),
C counters (one track per (pid, name, key)), M metadata, v1 flows s/t/f and v2 bind_id flows, async
b/e/n (slices on ASYNC tracks); other phases are counted into `metadata["load_warnings"]`.
Times become Unix ns: `baseTimeNanoseconds` + µs converted exactly; without a base, µs that already
look like Unix time (> 1e15) are used as they are, and anything else is marked `clock="relative"`.
Kineto's top-level keys are kept under `metadata["kineto"]`; the `neuron_prof` key our exporter writes
restores track kinds, probe tracks, metadata and findings, so JSON -> model -> JSON -> model is exact.
Truncated or damaged files load best-effort with warnings (see `_json_read`).
Pieces of X, flow and instant events go through the compiled scanner (`_json_scan`, `_jscan.c`) in threads
when it is built, the rest through msgspec/orjson; a large file is read (gunzipped) by a thread meanwhile
(`_json_fill`). Either way the Trace is the same.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from neuron_prof.errors import TraceFormatError, TraceLoadError
from neuron_prof.loaders._json_events import Columns, EventColumns
from neuron_prof.loaders._json_values import as_str, norm_id, us_to_ns
from neuron_prof.loaders._json_flows import SliceIndex, bind_v1, bind_v2, unique_ids
from neuron_prof.loaders._json_pairs import pair_async, pair_begin_end
from neuron_prof.loaders._json_parallel import HEAD_BYTES, parse_parallel, workers_wanted
from neuron_prof.loaders._json_fill import MIN_BYTES as FILL_MIN
from neuron_prof.loaders._json_fill import Fill, gzip_size, read_bytes
from neuron_prof.loaders._json_read import JsonEventReader
from neuron_prof.loaders._json_scan import scan_enabled
from neuron_prof.loaders._json_restore import restore_own
from neuron_prof.model import ArgsStore, Trace, TraceBuilder
from neuron_prof.model import CounterTable, FlowTable, InstantTable, SliceTable
from neuron_prof.model.schema import META_KEY, KinetoCat, Meta, ProcessKind, TrackKind

__all__ = ["load_kineto_json", "parse_kineto_into"]

UNIX_US_MIN = 1e15
"""Without baseTimeNanoseconds, timestamps above this many µs (2001-09-09) are taken as Unix µs."""
_PARSE_BATCH = 50_000


def load_kineto_json(path: str | os.PathLike[str], *,
                     transform: Callable[[list[Any]], list[Any]] | None = None) -> Trace:
    """Load a Chrome/Kineto JSON trace (.json or .json.gz).

    Args:
        path: the file.
        transform: applied to each chunk of parsed traceEvents entries before they are converted (capture
            rewrites stacks this way); the file is then read in this process.

    Raises:
        TraceLoadError: missing, unreadable or a directory; TraceFormatError: not a trace at all.
    """
    with _no_gc():
        return _load(Path(path), transform)


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic GC off while millions of short-lived dicts are made: with it on, its collections walk
    every live event dict again and again (measured: column extraction 3x slower)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _load(p: Path, transform: Callable[[list[Any]], list[Any]] | None = None) -> Trace:
    if p.is_dir():
        raise TraceLoadError(p, "is a directory, not a trace file")
    if p.exists() and not p.is_file():
        # a FIFO blocks until a writer comes and /dev/zero never ends: only regular files are read
        raise TraceLoadError(p, "not a regular file (a pipe, socket or device); save the trace to a file first")
    try:
        size = p.stat().st_size
    except OSError:
        size = 0  # read_bytes says what is wrong
    workers = workers_wanted(size) if transform is None else 1
    if workers > 1:
        trace = _load_parallel(p, size, workers, p)
        if trace is not None:
            return trace
    warnings: list[str] = []
    fill = _fill(p, size) if transform is None else None
    raw = read_bytes(p, warnings) if fill is None else fill.raw
    gz_warnings = fill.warnings if fill is not None else []
    n = len(raw)
    if fill is None and n != size and not warnings and transform is None and workers_wanted(n) > 1:
        # A large .json.gz: gunzipped into a temporary file, the workers can read their ranges from it.
        tmp = _spill(raw)
        if tmp is not None:
            del raw
            try:
                trace = _load_parallel(tmp, n, workers_wanted(n), p)
            finally:
                tmp.unlink(missing_ok=True)
            if trace is not None:
                return trace
            raw = read_bytes(p, warnings)
    reader = JsonEventReader(raw, p, typed=transform is None, fill=fill)
    del raw, fill  # the reader lets go of the bytes once parsed
    builder = TraceBuilder()
    conv = _Converter(builder, str(p))
    try:
        for chunk in reader.chunks():
            conv.add(chunk if transform is None else transform(chunk))
    except RecursionError:
        raise TraceFormatError(p, "JSON nested too deeply to read") from None
    # every warning of read_bytes is a damaged or cut gzip stream: the events after it are lost
    warnings += gz_warnings
    lost = warnings + reader.lost
    partial = (partial_info(lost, truncated=bool(warnings) or reader.truncated, bytes_read=reader.bytes_read)
               if lost else None)
    return _finish(p, conv, reader.top, warnings + reader.warnings, partial)


def _fill(p: Path, size: int) -> Fill | None:
    """A large file read (gunzipped) by a thread while the scanner starts on its front (None: read it at once)."""
    if not scan_enabled():
        return None
    try:
        with open(p, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
    except OSError:
        return None  # read_bytes says what is wrong
    if gz:
        isize = gzip_size(p, size)
        return Fill(p, isize, gz=True) if isize is not None and isize >= FILL_MIN else None
    return Fill(p, size) if size >= FILL_MIN else None


def _spill(raw: bytes | bytearray) -> Path | None:
    """`raw` in a temporary file (None if it cannot be written: the caller parses in memory instead)."""
    fd, name = tempfile.mkstemp(prefix="neuron-prof-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        return Path(name)
    except OSError:
        Path(name).unlink(missing_ok=True)
        return None


def _load_parallel(p: Path, size: int, workers: int, source: Path) -> Trace | None:
    """The same Trace as the sequential path, parsed by `workers` processes; None when it does not apply.
    `p` holds the JSON (plain); `source` is the file the user named."""
    try:
        with open(p, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return None
    if head[:2] == b"\x1f\x8b":
        return None  # gzip: one stream, read sequentially
    reader = JsonEventReader(head, p)
    try:
        frame = reader._frame()
    except TraceLoadError:
        return None
    if isinstance(frame, list) or frame[1] is None:
        return None
    start, obj_start = frame
    parts = parse_parallel(p, size, workers, start)
    if parts is None or parts[-1]["suffix"] is None:
        return None
    try:
        top = orjson.loads(head[obj_start:start - 1] + b"[]" + parts[-1]["suffix"])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(top, dict):
        return None
    top.pop("traceEvents", None)
    conv = _Converter(TraceBuilder(), str(source))
    for part in parts:
        conv.merge_part(part)
    return _finish(source, conv, top, [])


def partial_info(problems: list[str], *, truncated: bool, bytes_read: int) -> dict[str, Any]:
    """`metadata["partial"]` of a file whose events were not all read (README: "Damaged input")."""
    return {"truncated": truncated, "problems": list(problems), "bytes_read": int(bytes_read)}


def _finish(p: Path, conv: _Converter, top: dict[str, Any], warnings: list[str],
            partial: dict[str, Any] | None = None) -> Trace:
    builder = conv.b
    if conv.events.entries and not conv.n_events_read():
        raise TraceFormatError(p, f"none of the {conv.events.entries:,} entries of traceEvents is a trace event "
                                  f"({_first_warning(conv)}): not a Chrome/Kineto trace")
    if not conv.events.entries and warnings:
        raise TraceFormatError(p, f"no complete event could be read: {warnings[-1]}")
    cols, flows = conv.finish(top, warnings)
    trace = builder.build()
    trace = trace.replace(
        slices=SliceTable(ts_ns=cols.s_ts, dur_ns=cols.s_dur, track=cols.s_track, name=cols.s_name,
                          cat=cols.s_cat, args=cols.s_args),
        instants=InstantTable(ts_ns=cols.i_ts, track=cols.i_track, name=cols.i_name, cat=cols.i_cat,
                              args=cols.i_args),
        counters=CounterTable(ts_ns=cols.c_ts, track=cols.c_track, value=cols.c_value),
        flows=flows,
        args=ArgsStore(cols.args_blob, np.concatenate(([0], np.cumsum(cols.args_lengths))).astype(np.int64)))
    own = top.get(META_KEY)
    if isinstance(own, dict):
        trace = restore_own(trace, own, builder.metadata.get(Meta.WARNINGS))
    if partial is not None:  # after the restore: it describes this read of the file, not an earlier one
        trace = trace.replace(metadata={**trace.metadata, Meta.PARTIAL: partial})
    return trace


def parse_kineto_into(builder: TraceBuilder, data: dict[str, Any], source: str) -> None:
    """Add a parsed Kineto/Chrome JSON document (a dict with traceEvents, or a list of events) to `builder`.

    May be called several times on one builder (one call per profiler cycle); slices, args and flows are
    appended after what the builder holds.
    """
    if isinstance(data, list):
        events, top = data, {}
    elif isinstance(data, dict):
        events = data.get("traceEvents", [])
        top = {k: v for k, v in data.items() if k != "traceEvents"}
    else:
        raise TraceFormatError(source, f"JSON {type(data).__name__} is not a trace")
    if not isinstance(events, list):
        raise TraceFormatError(source, f"traceEvents is a {type(events).__name__}, not a list")
    with _no_gc():
        conv = _Converter(builder, source)
        for k in range(0, len(events), _PARSE_BATCH):
            conv.add(events[k:k + _PARSE_BATCH])
        cols, flows = conv.finish(top, [])
    b = builder
    b.s_ts.extend(cols.s_ts.tolist())
    b.s_dur.extend(cols.s_dur.tolist())
    b.s_track.extend(cols.s_track.tolist())
    b.s_name.extend(cols.s_name.tolist())
    b.s_cat.extend(cols.s_cat.tolist())
    b.s_args.extend(cols.s_args.tolist())
    b.i_ts.extend(cols.i_ts.tolist())
    b.i_track.extend(cols.i_track.tolist())
    b.i_name.extend(cols.i_name.tolist())
    b.i_cat.extend(cols.i_cat.tolist())
    b.i_args.extend(cols.i_args.tolist())
    b.c_ts.extend(cols.c_ts.tolist())
    b.c_track.extend(cols.c_track.tolist())
    b.c_value.extend(cols.c_value.tolist())
    blob, o = cols.args_blob, np.concatenate(([0], np.cumsum(cols.args_lengths))).tolist()
    add_raw = b.args.add_raw
    for i in range(len(o) - 1):
        add_raw(blob[o[i]:o[i + 1]])
    b.f_src.extend(flows.src.tolist())
    b.f_dst.extend(flows.dst.tolist())
    b.f_id.extend(flows.flow_id.tolist())
    b.f_cat.extend(flows.cat.tolist())
    b.f_name.extend(flows.name.tolist())


def _first_warning(conv: _Converter) -> str:
    w = conv.events.warn.most_common(1)
    return f"{w[0][1]:,} {w[0][0]}" if w else "no 'ph' field"


class _Converter:
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
        self._kinds(cols)
        self._metadata(top, clock, warnings + [f"{n:,} {w}" for w, n in ev.warn.items() if n])
        cols.args_blob = args_blob()
        return cols, flows

    def _clock(self, top: dict[str, Any]) -> tuple[int, str]:
        base = top.get("baseTimeNanoseconds")
        if _is_int(base) or (isinstance(base, float) and abs(base) < 9e18):
            return int(base), "unix"
        firsts = [c[0][:1] for c in self.events._s[:1] + self.events._i[:1]]
        first = float(np.concatenate(firsts).max()) if any(len(f) for f in firsts) else 0.0
        return 0, "unix" if first > UNIX_US_MIN else "relative"

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

    def _flows(self, cols: Columns, base: int) -> FlowTable:
        ev = self.events
        strings = self.b.strings
        parts = []
        unbound = 0
        if ev.n_flow_ends:
            index = SliceIndex(cols.s_ts, cols.s_dur, cols.s_track)
            (ph, kid, track, ts_us, bp, hint), keys = ev.flow_ends()
            hint = np.where((hint >= 0) & (hint < 2**62), hint, -1)  # rows of this file, as ours are
            fl, unbound = bind_v1(ph, kid, track, us_to_ns(ts_us, base), bp, hint, cols.s_ts, cols.s_dur,
                                  cols.s_track, index)
            cat_of = ev.sids([k[0] for k in keys])
            name_of = ev.sids([k[1] for k in keys])
            want = _wanted_ids([k[2] for k in keys])
            parts.append((fl.src, fl.dst, want[fl.key], cat_of[fl.key], name_of[fl.key]))
        if ev.v2:
            fl = bind_v2(ev.v2, cols.s_ts)
            n = len(fl.src)
            parts.append((fl.src, fl.dst, np.full(n, -1, np.int64), np.full(n, strings.intern("flow"), np.int32),
                          np.full(n, strings.intern("flow"), np.int32)))
            ev.v2 = []
        if unbound:
            ev.warn["flow events not bound to any slice (arrow dropped)"] += unbound
        if not parts:
            return _empty_flows()
        src = np.concatenate([p[0] for p in parts]) + self.row_base
        dst = np.concatenate([p[1] for p in parts]) + self.row_base
        ids = unique_ids(np.concatenate([p[2] for p in parts]), np.asarray(self.b.f_id, dtype=np.int64))
        return FlowTable(src=src, dst=dst, flow_id=ids, cat=np.concatenate([p[3] for p in parts]),
                         name=np.concatenate([p[4] for p in parts]))

    def _kinds(self, cols: Columns) -> None:
        """Threads running device activity (kernels, memcpy, ...) are DEVICE tracks in DEVICE processes."""
        dev = self.b.strings
        ids = [i for i in (dev.get(c) for c in KinetoCat.DEVICE_CATS) if i is not None]
        if not ids:
            return
        for t in np.unique(cols.s_track[np.isin(cols.s_cat, ids)]).tolist():
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


def _wanted_ids(ids: list[Any]) -> np.ndarray:
    """Flow ids kept as ids: ints in [0, 2**62), else -1 (a string, None, a float...)."""
    if set(map(type, ids)) <= {int}:
        try:
            a = np.array(ids, dtype=np.int64)
            return np.where((a >= 0) & (a < 2**62), a, -1)
        except OverflowError:
            pass
    return np.array([i if type(i) is int and 0 <= i < 2**62 else -1 for i in ids], dtype=np.int64)


def _is_int(v: Any) -> bool:
    return type(v) is int


def _empty_flows() -> FlowTable:
    z = np.zeros(0, np.int64)
    return FlowTable(src=z, dst=z, flow_id=z, cat=np.zeros(0, np.int32), name=np.zeros(0, np.int32))
