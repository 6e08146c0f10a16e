"""Chrome/Kineto JSON export: the model -> `.json` / `.json.gz` that Perfetto UI, chrome://tracing and
Holistic Trace Analysis open, streamed to disk in chunks.

    from neuron_prof.exporters.chrome_json import write_chrome_json
    write_chrome_json(trace, "run/trace.json.gz")

Kineto's conventions: top-level `schemaVersion`, `deviceProperties`, `distributedInfo` (and every other
Kineto key the trace was loaded with), `baseTimeNanoseconds`, `displayTimeUnit`, then `traceEvents`: M events
naming processes and threads (with sort indices), `X` slices on their original pid/tid with `ts` in µs
relative to `baseTimeNanoseconds` (3 decimals, exact), `i` instants (scope "t"), `C` counters, and `s`/`f`
flow pairs (`"bp": "e"` on `f`) with id, cat and name. Probe tracks without a thread id (compile, fallback,
sync, device queues, findings, ...) get a stable synthetic tid in their process, named by thread_name.
Findings go in the top-level `neuron_prof` key and, as instants, on a "findings" track.

The `neuron_prof` key (see `neuron_prof.loaders.json.restore`) holds what Chrome JSON cannot say (track
kinds, units, probe tracks, metadata, findings); flow ends carry `np_slice`, the row of their slice, so
reading the file back gives the same Trace. Events are formatted straight to bytes from the numpy
columns (strings escaped once each), about 1M events/s here; a dict per event with orjson is 0.6x that.
A trace from the column cache is read a chunk at a time: its args documents copied out of the blob a span at a
time, flows' ends a window of the table at a time, the mapped pages let go after each chunk (`_reads`), so the
writer's memory does not grow with the trace (10.5M events: 137 MB).
"""

from __future__ import annotations

import gzip
import os
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
import orjson

from neuron_prof.errors import ExportError
from neuron_prof.exporters._reads import Pages, doc_list, gather
from neuron_prof.formats import gzipped
from neuron_prof.model import Trace
from neuron_prof.model.schema import FORMAT_VERSION, META_KEY, Cat, Meta, ProcessKind, TrackKind

if TYPE_CHECKING:
    from neuron_prof.merge import FlowEnds

__all__ = ["json_stream", "write_chrome_json"]

CHUNK = 32_768
"""Events formatted and written at a time: bounds the memory of the text being built (a few copies of a chunk's
text and args documents: ~50 MB at 300 bytes an event)."""
SYNTHETIC_TID_BASE = 0x70000000
"""Synthetic tids live above this (and below 2**31: Perfetto keeps tids in 32 bits)."""
GZIP_LEVEL = 1
"""zlib level 1: about 4x faster than the default 6 for a file 20% larger; JSON still shrinks ~10x."""

_J_OPTS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
_PREFERRED_TOP = ("schemaVersion", "deviceProperties", "distributedInfo")


def json_stream(raw: BinaryIO, path: Path) -> BinaryIO:
    """`raw`, or a gzip stream into it when `path`'s name says gzip (`neuron_prof.formats.gzipped`); the
    gzip member is named like the file less its last suffix. The caller closes a stream it was given back."""
    if not gzipped(path):
        return raw
    return gzip.GzipFile(filename=path.stem, fileobj=raw, mode="wb", compresslevel=GZIP_LEVEL)  # type: ignore[return-value]


def write_chrome_json(trace: Trace, path: str | os.PathLike[str]) -> None:
    """Write `trace` as Chrome/Kineto JSON (gzipped when the name says so: `neuron_prof.formats.gzipped`).

    Writes to a temporary file beside `path` and renames it, so a failed export never leaves a half file
    where a good one was.

    Raises:
        ExportError: the file cannot be written (the message names it and the reason).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as raw:
            out = json_stream(raw, path)
            try:
                for block in _ChromeWriter(trace).blocks():
                    out.write(block)
            finally:
                if out is not raw:
                    out.close()
        os.replace(tmp, path)
    except BaseException as e:  # any failure (full disk, a bug, Ctrl-C) leaves no half file behind
        try:
            tmp.unlink()
        except OSError:
            pass
        if not isinstance(e, (OSError, zlib.error)):
            raise
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise ExportError(f"{path}: cannot write the trace ({reason})") from None


def _dumps(v: Any) -> bytes:
    return orjson.dumps(v, option=_J_OPTS, default=_default)


def _default(v: Any) -> Any:
    if isinstance(v, (tuple, set, frozenset)):
        return list(v)
    return str(v)


def _numbers(a: np.ndarray) -> list[bytes]:
    """JSON text of each number (orjson's shortest round-trip floats), split apart; numbers hold no commas."""
    if not len(a):
        return []
    return orjson.dumps(a.tolist())[1:-1].split(b",")


class _ChromeWriter:
    """Formats one trace; `blocks()` yields the file's bytes in pieces.

    As one rank of a merged file (`neuron_prof.exporters.merged`), `events()` gives its events only, with
    `base` the file's time base, `row_base` its first slice's merged row (flow ends carry merged rows) and
    `flow_ends` its ends of the cross-rank flows."""

    def __init__(self, trace: Trace, *, base: int | None = None, row_base: int = 0,
                 flow_ends: FlowEnds | None = None) -> None:
        self.t = trace
        self.enc = np.array([_dumps(s) for s in trace.strings.as_list()], dtype=object)
        """JSON text of each interned string, escaped once."""
        lo, _ = trace.time_range()
        self.unix = trace.metadata.get(Meta.CLOCK, "unix") != "relative"
        self.base = base if base is not None else (lo // 1_000_000_000) * 1_000_000_000 if self.unix else 0
        self.row_base = row_base
        self.flow_ends = flow_ends
        self.pages = Pages(trace, None)
        """A trace from the column cache: the mapped pages read for a chunk are let go after it."""
        self._tids()

    # ---- tracks --------------------------------------------------------------------------------------
    def _tids(self) -> None:
        """The (pid, tid) each track is written with; synthetic tids for tracks without one."""
        t = self.t
        used: dict[int, set[Any]] = {}
        for tr in t.tracks:
            if tr.tid is not None:
                used.setdefault(tr.process, set()).add(tr.tid)
        self.tid: list[Any] = []
        for tr in t.tracks:
            tid = tr.tid
            if tid is None:
                taken = used.setdefault(tr.process, set())
                tid = SYNTHETIC_TID_BASE + (zlib.crc32(f"{tr.kind}:{tr.name}".encode()) & 0xFFFFFF)
                while tid in taken:
                    tid += 1
                taken.add(tid)
            self.tid.append(tid)
        pids = [t.processes[tr.process].pid for tr in t.tracks]
        # ,"pid":P,"tid":T for each track, formatted once
        self.pidtid = np.array([b',"pid":%b,"tid":%b' % (_dumps(p), _dumps(d)) for p, d in zip(pids, self.tid)]
                               + [b""], dtype=object)
        self.pid = np.array([b',"pid":%b' % _dumps(p) for p in pids] + [b""], dtype=object)
        # findings that exist only in trace.findings get a track of their own
        self.findings_track: tuple[Any, Any] | None = None
        if t.findings and not len(t.instants_on(TrackKind.FINDINGS)):
            hosts = [p for p in t.processes if p.kind == ProcessKind.HOST] or list(t.processes)
            pid = hosts[0].pid if hosts else "neuron-prof"
            taken = {self.tid[i] for i, tr in enumerate(t.tracks) if t.processes[tr.process].pid == pid}
            tid = SYNTHETIC_TID_BASE + (zlib.crc32(b"findings:findings") & 0xFFFFFF)
            while tid in taken:
                tid += 1
            self.findings_track = (pid, tid)

    def _ts(self, ns: np.ndarray) -> list[bytes]:
        return _numbers((ns - self.base) / 1000.0)

    # ---- document -------------------------------------------------------------------------------------
    def blocks(self) -> Iterator[bytes]:
        yield self._header()
        first = True
        for block in self.events():
            if block:
                if not first:
                    yield b",\n"  # not joined to the block: no copy of it
                yield block
                first = False
        yield b"\n]}\n"

    def _header(self) -> bytes:
        t = self.t
        kineto = dict(t.metadata.get(Meta.KINETO) or {})
        top: dict[str, Any] = {"schemaVersion": kineto.pop("schemaVersion", 1),
                               "deviceProperties": kineto.pop("deviceProperties", [])}
        dist = kineto.pop("distributedInfo", None)
        if dist is None and t.metadata.get(Meta.RANK) is not None:
            dist = {"rank": t.metadata[Meta.RANK], "world_size": t.metadata.get(Meta.WORLD_SIZE, 1)}
        if dist is not None:
            top["distributedInfo"] = dist
        for k in ("traceEvents", "baseTimeNanoseconds", "displayTimeUnit", META_KEY):
            kineto.pop(k, None)
        top.update(kineto)
        if self.unix:
            top["baseTimeNanoseconds"] = self.base
        top["displayTimeUnit"] = "ms"
        top[META_KEY] = self.own()
        head = _dumps(top)
        return head[:-1] + b',\n"traceEvents":[\n'

    def own(self) -> dict[str, Any]:
        """The `neuron_prof` block (see neuron_prof.loaders.json.restore)."""
        t = self.t
        procs = [{"pid": p.pid, "name": p.name, "kind": p.kind, "rank": p.rank, "sort_index": p.sort_index,
                  "labels": p.labels} for p in t.processes]
        tracks = []
        for i, tr in enumerate(t.tracks):
            pid = t.processes[tr.process].pid
            e: dict[str, Any] = {"pid": pid, "name": tr.name, "kind": tr.kind, "orig_tid": tr.tid,
                                 "unit": tr.unit, "sort_index": tr.sort_index}
            if tr.is_counter:
                cname, ckey = _counter_name(tr.name)
                e["counter"] = f"{cname} {ckey}"
            else:
                e["tid"] = self.tid[i]
            tracks.append(e)
        if self.findings_track is not None:
            pid, tid = self.findings_track
            tracks.append({"pid": pid, "tid": tid, "name": "findings", "kind": TrackKind.FINDINGS,
                           "synthetic": True})
            if not t.processes:
                procs.append({"pid": pid, "name": "neuron-prof", "kind": ProcessKind.HOST, "synthetic": True})
        md = {k: v for k, v in t.metadata.items() if k != Meta.KINETO}
        return {"format_version": FORMAT_VERSION, "metadata": md, "findings": list(t.findings),
                "processes": procs, "tracks": tracks}

    def events(self) -> Iterator[bytes]:
        """The traceEvents' elements, comma-separated, in blocks (some may be empty)."""
        yield self._metadata_events()
        yield from self._slices()
        yield from self._instants()
        yield from self._counters()
        yield from self._flows()
        yield self._flow_ends()
        yield self._findings()

    def _metadata_events(self) -> bytes:
        t = self.t
        out: list[bytes] = []
        m = b'{"ph":"M","name":"%b","pid":%b,"tid":%b,"args":{"%b":%b}}'
        for p in t.processes:
            pid = _dumps(p.pid)
            out.append(m % (b"process_name", pid, b"0", b"name", _dumps(p.name)))
            if p.labels:
                out.append(m % (b"process_labels", pid, b"0", b"labels", _dumps(p.labels)))
            if p.sort_index is not None:
                out.append(m % (b"process_sort_index", pid, b"0", b"sort_index", _dumps(p.sort_index)))
        for i, tr in enumerate(t.tracks):
            if tr.is_counter:
                continue
            pid, tid = _dumps(t.processes[tr.process].pid), _dumps(self.tid[i])
            out.append(m % (b"thread_name", pid, tid, b"name", _dumps(tr.name)))
            if tr.sort_index is not None:
                out.append(m % (b"thread_sort_index", pid, tid, b"sort_index", _dumps(tr.sort_index)))
        if self.findings_track is not None:
            pid, tid = (_dumps(v) for v in self.findings_track)
            if not t.processes:
                out.append(m % (b"process_name", pid, b"0", b"name", b'"neuron-prof"'))
            out.append(m % (b"thread_name", pid, tid, b"name", b'"findings"'))
        return b",\n".join(out)

    def _args(self, idx: np.ndarray) -> list[bytes]:
        """`,"args":{...}` for each args index (empty for -1): the raw documents of the store's blob, read a span
        at a time (`doc_list`), no re-encoding."""
        out = [b""] * len(idx)
        has = np.flatnonzero(idx >= 0)
        for i, d in zip(has.tolist(), doc_list(self.t, idx[has])):
            out[i] = b',"args":' + d
        return out

    def _slices(self) -> Iterator[bytes]:
        s, enc = self.t.slices, self.enc
        for a in range(0, len(s), CHUNK):
            b = min(a + CHUNK, len(s))
            ts, dur = self._ts(s.ts_ns[a:b]), _numbers(s.dur_ns[a:b] / 1000.0)
            cat, name = enc[s.cat[a:b]].tolist(), enc[s.name[a:b]].tolist()
            pt = self.pidtid[s.track[a:b]].tolist()
            args = self._args(s.args[a:b])
            yield b",\n".join([b'{"ph":"X","cat":%b,"name":%b%b,"ts":%b,"dur":%b%b}' % r
                               for r in zip(cat, name, pt, ts, dur, args)])
            self.pages.done(b - a)

    def _instants(self) -> Iterator[bytes]:
        s, enc = self.t.instants, self.enc
        for a in range(0, len(s), CHUNK):
            b = min(a + CHUNK, len(s))
            ts = self._ts(s.ts_ns[a:b])
            cat, name = enc[s.cat[a:b]].tolist(), enc[s.name[a:b]].tolist()
            pt = self.pidtid[s.track[a:b]].tolist()
            args = self._args(s.args[a:b])
            yield b",\n".join([b'{"ph":"i","s":"t","cat":%b,"name":%b%b,"ts":%b%b}' % r
                               for r in zip(cat, name, pt, ts, args)])
            self.pages.done(b - a)

    def _counters(self) -> Iterator[bytes]:
        c, t = self.t.counters, self.t
        if not len(c):
            return
        names = np.array([b"" if not tr.is_counter else b'"name":%b,"args":{%b:' % tuple(
            _dumps(x) for x in _counter_name(tr.name)) for tr in t.tracks], dtype=object)
        for a in range(0, len(c), CHUNK):
            b = min(a + CHUNK, len(c))
            ts, val = self._ts(c.ts_ns[a:b]), _numbers(c.value[a:b])
            tr = c.track[a:b]
            yield b",\n".join([b'{"ph":"C",%b}%b,"ts":%b}' % (n + v, p, s)
                               for n, v, p, s in zip(names[tr].tolist(), val, self.pid[tr].tolist(), ts)])
            self.pages.done(b - a)

    def _flows(self) -> Iterator[bytes]:
        f, s, enc = self.t.flows, self.t.slices, self.enc
        for a in range(0, len(f), CHUNK):
            b = min(a + CHUNK, len(f))
            src, dst = f.src[a:b], f.dst[a:b]
            ids = _numbers(f.flow_id[a:b])
            cat, name = enc[f.cat[a:b]].tolist(), enc[f.name[a:b]].tolist()
            (s_at, s_tr), (d_at, d_tr) = (gather(self.t, (s.ts_ns, s.track), r) for r in (src, dst))
            s_ts, d_ts = self._ts(s_at), self._ts(d_at)
            s_pt, d_pt = self.pidtid[s_tr].tolist(), self.pidtid[d_tr].tolist()
            rows_s, rows_d = _numbers(src + self.row_base), _numbers(dst + self.row_base)
            out = []
            for i, c, n, spt, sts, sr, dpt, dts, dr in zip(ids, cat, name, s_pt, s_ts, rows_s, d_pt, d_ts, rows_d):
                out.append(b'{"ph":"s","id":%b,"cat":%b,"name":%b%b,"ts":%b,"np_slice":%b}' % (i, c, n, spt, sts, sr))
                out.append(b'{"ph":"f","bp":"e","id":%b,"cat":%b,"name":%b%b,"ts":%b,"np_slice":%b}'
                           % (i, c, n, dpt, dts, dr))
            yield b",\n".join(out)
            self.pages.done(b - a)

    def _flow_ends(self) -> bytes:
        """This rank's ends of cross-rank flows: "s" on sources, "f" on destinations, merged rows in np_slice."""
        fe, s = self.flow_ends, self.t.slices
        if fe is None or not len(fe):
            return b""
        cat, name = _dumps(fe.cat), _dumps(fe.name)
        ph = [b'"ph":"s"' if x else b'"ph":"f","bp":"e"' for x in fe.is_src.tolist()]
        ts, tr = gather(self.t, (s.ts_ns, s.track), fe.row)
        return b",\n".join([b'{%b,"id":%b,"cat":%b,"name":%b%b,"ts":%b,"np_slice":%b}' % (p, i, cat, name, pt, ts, r)
                            for p, i, pt, ts, r in zip(ph, _numbers(fe.flow_id), self.pidtid[tr].tolist(),
                                                       self._ts(ts), _numbers(fe.row + self.row_base))])

    def _findings(self) -> bytes:
        if self.findings_track is None:
            return b""
        lo, _ = self.t.time_range()
        return findings_events(self.t.findings, self.findings_track, self.base, lo)


def findings_events(findings: Any, track: tuple[Any, Any], base: int, default_ts: int) -> bytes:
    """One instant per finding on the (pid, tid) track, comma-separated: name = title, args = the finding."""
    pid, tid = (_dumps(v) for v in track)
    out = []
    for fd in findings:
        ts = fd.get("ts_ns") if isinstance(fd.get("ts_ns"), int) else default_ts
        out.append(b'{"ph":"i","s":"t","cat":%b,"name":%b,"pid":%b,"tid":%b,"ts":%b,"args":%b}' % (
            _dumps(Cat.FINDING), _dumps(str(fd.get("title") or fd.get("kind") or "finding")), pid, tid,
            _numbers(np.array([(ts - base) / 1000.0]))[0], _dumps(fd)))
    return b",\n".join(out)


def _counter_name(name: str) -> tuple[str, str]:
    """(C event name, args key) for a counter track: Perfetto names C tracks "<name> <key>"."""
    if " " in name.strip():
        a, b = name.rsplit(" ", 1)
        if a and b:
            return a, b
    return name, "value"
