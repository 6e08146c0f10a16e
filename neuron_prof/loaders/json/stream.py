"""Chrome/Kineto JSON bigger than memory: read once, in bounded pieces, straight into a column folder.

    if stream_wanted(path): ingest(path, folder, key)     # then neuron_prof.loaders.coldir.read_trace(folder)

The file (gunzipped on the fly for `.json.gz`) is cut into pieces of about PIECE_BYTES between two events
(`_pieces`: a plain file's next piece is read in a thread while one is parsed); each piece is parsed as the
parallel path parses a range (`_parallel.parse_range`), merged into one Converter (tracks, strings, flow
endpoints) and its columns handed at once to a thread that appends them to files, so neither the file nor its
columns are ever held whole. Times become ns as they come, with baseTimeNanoseconds when the text before
traceEvents holds it (else 0); one that follows traceEvents moves them at the end, in bounded steps (exact:
the base is added last). Flow endpoints go to files as they come (their keys as `_keycodes` codes); the end
binds them to slices and pairs them in windows (`_bindwin`: about `spill.WINDOW` slices, endpoints or arrows
in memory at a time, the rest in temporary files beside the columns). What stays in memory grows with the
B/E and async events (paired at the end, as on the other paths) and v2 bind ids, not with slices or flows.
The Trace holds the events, names and args the in-memory path gives (string and args ids may be numbered in
another order); a damaged file keeps its load warnings but not `metadata["partial"]`.
"""

from __future__ import annotations

import gc
import os
import resource
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import orjson

from neuron_prof.errors import OutOfMemoryError
from neuron_prof.formats import GZIP_MAGIC
from neuron_prof.loaders.coldir import ARGS, ColumnWriter, trace_head, write_strings
from neuron_prof.loaders.gc_hold import no_gc
from neuron_prof.loaders.json._bindwin import EndColumns, assign_ids, bound_rows, emit_arrows
from neuron_prof.loaders.json._convert import Converter, clock_of
from neuron_prof.loaders.json._events import EventColumns
from neuron_prof.loaders.json._keycodes import KeyCodes
from neuron_prof.loaders.json._pieces import PIECE_BYTES, parsed_pieces, piece_bytes
from neuron_prof.loaders.json._values import us_to_ns
from neuron_prof.loaders.json.fill import gzip_size
from neuron_prof.loaders.json.restore import restore_own
from neuron_prof.model import FlowTable, TraceBuilder
from neuron_prof.model.schema import META_KEY, Meta

__all__ = ["MEMORY_LIMIT_ENV", "PIECE_BYTES", "ingest", "json_bytes", "memory_limit", "memory_room", "piece_bytes",
           "stream_wanted"]

_STEP = 8 << 20
"""Rows converted µs -> ns at a time."""
NEED_PER_BYTE = 2.0
"""Memory the in-memory load needs per byte of JSON (measured: 1.6-1.7x the file)."""
GZ_RATIO_GUESS = 10
"""A .json.gz whose trailer cannot tell its size (over 4 GB) is taken as this many times bigger."""


def json_bytes(path: Path) -> int:
    """The size of the JSON text in `path` (gunzipped size for gzip, estimated past 4 GB)."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        gz = f.read(2) == GZIP_MAGIC
    if not gz:
        return size
    return gzip_size(path, size) or size * GZ_RATIO_GUESS


MEMORY_LIMIT_ENV = "NEURON_PROF_MEMORY_LIMIT"
"""Bytes this process may take in all (its RSS included): a budget the loader keeps to, as it keeps to an address-space
limit, without the kernel enforcing it. A job's local Dask workers get their share of the machine this way."""


def memory_limit() -> int | None:
    """NEURON_PROF_MEMORY_LIMIT in bytes (1e9 and 2000000000 alike); None when unset, zero or not a number."""
    try:
        budget = int(float(os.environ.get(MEMORY_LIMIT_ENV, "0")))
    except ValueError:
        return None
    return budget if budget > 0 else None


def memory_room() -> int:
    """Bytes this process may still take: the least of the memory available, what its address-space and data
    limits leave (memory-mapped files count in the first, not in the second) and what NEURON_PROF_MEMORY_LIMIT
    leaves above its resident set."""
    room = []
    try:
        with open("/proc/meminfo", "rb") as f:
            for line in f:
                if line.startswith(b"MemAvailable:"):
                    room.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    budget = memory_limit()
    if budget is not None:
        room.append(max(0, budget - _status_bytes(b"VmRSS:")))
    limited = limit_room()
    if limited is not None:
        room.append(limited)
    return min(room) if room else 1 << 62


def limit_room() -> int | None:
    """Bytes this process's address-space and data limits leave it (None: no limit)."""
    room = []
    for limit, field in ((resource.RLIMIT_AS, b"VmSize:"), (resource.RLIMIT_DATA, b"VmData:")):
        soft, _ = resource.getrlimit(limit)
        if soft != resource.RLIM_INFINITY:
            room.append(max(0, soft - _status_bytes(field)))
    return min(room) if room else None


def _status_bytes(field: bytes) -> int:
    """A size from /proc/self/status (0 when unknown)."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def stream_wanted(path: Path, per_byte: float | None = None) -> bool:
    """Whether `path` should be streamed: NEURON_PROF_STREAM=1/0 says so, else when loading it in memory would
    need more than half the room left (`memory_room`): Chrome JSON, or `per_byte` times the file's size."""
    env = os.environ.get("NEURON_PROF_STREAM")
    if env is not None:
        return env not in ("0", "false", "no")
    try:
        need = _need(path, per_byte)
    except OSError:
        return False
    return need > memory_room() / 2


def _need(path: Path, per_byte: float | None) -> int:
    """Memory the in-memory load of `path` needs: Chrome JSON by its text, else `per_byte` times its size."""
    if per_byte is None:
        return int(json_bytes(path) * NEED_PER_BYTE)
    return int(path.stat().st_size * per_byte)


def check_room(path: Path, per_byte: float | None = None) -> None:
    """Raise OutOfMemoryError (one line) when loading `path` in memory (Chrome JSON, or `per_byte` times its
    size) would need more than this process's memory limits leave: said before the parse, where an allocation
    failing inside a compiled scanner's calls could end the process with SIGSEGV instead of a MemoryError."""
    room = limit_room()
    if room is None:
        return
    try:
        need = _need(path, per_byte)
    except OSError:
        return  # the reader says what is wrong with the file
    if need > room:
        raise OutOfMemoryError.before_load(str(path), need)


def ingest(path: Path, folder: Path, key: str) -> None:
    """Read the Chrome JSON trace `path` into the column folder `folder` (`neuron_prof.loaders.coldir`)."""
    with no_gc():
        ing = _Ingest(path, folder)
        try:
            with ing.w.closed_on_failure():
                ing.run(key)
        finally:
            ing.w.stop(quiet=True)  # after close(), nothing is left to stop


class _Ingest:
    def __init__(self, path: Path, folder: Path) -> None:
        self.path = path
        self.w = ColumnWriter(folder, background=True)
        self.folder = folder
        self.builder = TraceBuilder()
        self.conv = Converter(self.builder, str(path))
        self.firsts: dict[str, np.ndarray] = {}
        """The first slice's and the first instant's µs (what sets the clock without a base)."""
        self.guess = 0
        """The base (ns) the times are converted with as they come: baseTimeNanoseconds when the text before
        traceEvents holds it (Kineto's does), else 0; `_rebase` moves them when the document says otherwise."""
        self.args_end = 0
        """Bytes of args written so far (the args_off column is written as they come)."""
        self.warnings: list[str] = []
        self.codes = KeyCodes()

    def run(self, key: str) -> None:
        prefix = suffix = None
        pieces = 0
        for part, head in parsed_pieces(self.path, self.warnings):
            if part is None:
                prefix = head
                self.guess = clock_of(_top(prefix, b"}"), [])[0]
                self.w.append("args_off", np.zeros(1, np.int64))
                continue
            f, keys = part["f"], part["keys"]
            part["f"] = []  # flow endpoints go to files here, their keys as numbers (`KeyCodes`)
            self.conv.merge_part(part)
            if f:
                self._flow_ends(f, keys, part["log"])
            del f, keys
            self.warnings += part["warnings"]
            suffix = part["suffix"]
            del part
            self._drain()
            gc.collect(0)  # the GC is off while a piece is parsed: a piece's reader and scan threads form cycles
            # (all of them young: what earlier pieces left is older and need not be walked again)
            pieces += 1
            if not pieces % TRIM_EVERY:
                _trim()
        top = _top(prefix, suffix)
        conv = self.conv
        base, clock = clock_of(top, list(self.firsts.values()))
        conv._pair()
        self._drain()
        w = self.w
        for name in _NS:
            w.declare(name, np.int64)
        if base != self.guess:
            self._rebase(base)
        w.declare(ARGS, np.uint8)  # a trace without args has its (empty) blob too
        for name in ("slices.track", "slices.name", "slices.cat", "slices.args", "instants.track",
                     "instants.name", "instants.cat", "instants.args", "counters.track", "counters.value"):
            w.declare(name, _DTYPES[name])
            w.flush(name)
        cols = SimpleNamespace(s_ts=w.mapped("slices.ts_ns"), s_dur=w.mapped("slices.dur_ns"),
                               s_track=w.mapped("slices.track"), s_cat=w.mapped("slices.cat"))
        self._flows(cols, base)
        conv.finish_meta(cols, top, clock, self.warnings)
        del cols
        trace = self.builder.build()
        write_strings(w, trace.strings.as_list())
        own = top.get(META_KEY)
        if isinstance(own, dict):
            trace = restore_own(trace, own, self.builder.metadata.get(Meta.WARNINGS))
        w.close(trace_head(trace, key))

    def _flow_ends(self, f: list[np.ndarray], keys: list[tuple[Any, Any, Any]], log: list[tuple[Any, ...]]) -> None:
        """A part's flow endpoints to files: tracks as the trace's, keys as `KeyCodes` codes."""
        conv, w = self.conv, self.w
        tmap = np.array([conv._thread_track(e[1], e[2]) for e in log if e[0] == "t"], dtype=np.int32)
        ph, kid, tr, ts, bp, hint = f
        for name, a in zip(_F, (ph, self.codes.codes(keys)[kid], tmap[tr], ts, bp, hint), strict=True):
            w.append(name, a, _DTYPES[name])

    def _flows(self, cols: SimpleNamespace, base: int) -> None:
        """The flow table's columns, as `Converter._flows` makes them, a window at a time (`_bindwin`): v1
        endpoints from their files, then v2 bind ids; the endpoints' files removed."""
        w, conv = self.w, self.conv
        for c, dt in FlowTable.DTYPES.items():
            w.declare(f"flows.{c}", dt)
        w.declare("f_want", np.int64)
        unbound = 0
        if w.rows("f_code"):
            ph, code, track, ts_us, bp_e, hint = (w.mapped(n) for n in _F)
            ends = EndColumns(ph, code, track, ts_us, bp_e, hint, base)
            rows = bound_rows(self.folder, ends, cols.s_ts, cols.s_dur, cols.s_track)
            meta = self.codes.meta(conv.events.sids)
            unbound = emit_arrows(self.folder, ends, rows, lambda s, d, c: self._arrows(s, d, *meta(c)))
            del ends, rows
            (self.folder / "f_row").unlink()
        for name in _F:
            if name in w.names():
                w.drop(name)
        v2 = conv.v2_arrows(cols.s_ts)
        if v2 is not None:
            self._arrows(*v2)
        conv.count_unbound(unbound)
        taken = np.asarray(self.builder.f_id, dtype=np.int64)
        dt = FlowTable.DTYPES["flow_id"]
        assign_ids(self.folder, w.mapped("f_want"), taken, lambda ids: w.append("flows.flow_id", ids, dt))
        w.drop("f_want")

    def _arrows(self, src: np.ndarray, dst: np.ndarray, want: np.ndarray, cat: np.ndarray, name: np.ndarray) -> None:
        """Arrows (slice rows of this file) appended to the flow columns, their wanted ids to f_want."""
        w, dt = self.w, FlowTable.DTYPES
        w.append("flows.src", src + self.conv.row_base, dt["src"])
        w.append("flows.dst", dst + self.conv.row_base, dt["dst"])
        w.append("flows.cat", cat, dt["cat"])
        w.append("flows.name", name, dt["name"])
        w.append("f_want", want, np.int64)

    def _drain(self) -> None:
        """Move what the converter holds of slices, instants, counters and args to the column files."""
        ev: EventColumns = self.conv.events
        w = self.w
        for parts, names in ((ev._s, _S), (ev._i, _I)):
            for cols in parts:
                if len(cols[0]):
                    self.firsts.setdefault(names[0], cols[0][:1])
                w.append(names[0], us_to_ns(cols[0], self.guess))
                if names is _S:
                    w.append(names[1], us_to_ns(cols[1], 0))
                for name, a in zip(names, cols, strict=True):
                    if name in _DTYPES:
                        w.append(name, a, _DTYPES[name])
            parts.clear()
        if ev._c_ts:
            w.append("counters.ts_ns", us_to_ns(np.array(ev._c_ts, np.float64), self.guess))
            w.append("counters.track", np.array(ev._c_track, np.int32))
            w.append("counters.value", np.array(ev._c_val, np.float64))
            ev._c_ts, ev._c_track, ev._c_val = [], [], []
        for b in ev._blobs:
            w.append(ARGS, b)
        for n in ev._lens:
            if len(n):
                off = np.cumsum(n, dtype=np.int64)
                off += self.args_end
                self.args_end = int(off[-1])
                w.append("args_off", off)
        ev._blobs.clear()
        ev._lens.clear()

    def _rebase(self, base: int) -> None:
        """The times written with `guess` as the base moved to `base` (baseTimeNanoseconds came after
        traceEvents), a bounded step at a time: us_to_ns adds the base last, so this is exact."""
        w = self.w
        for name in _BASED:
            w.flush(name)
            n = w.rows(name)
            if not n:
                continue
            col = np.memmap(self.folder / name, dtype=np.int64, mode="r+", shape=(n,))
            for k in range(0, n, _STEP):
                part = col[k:k + _STEP]
                part -= np.int64(self.guess)
                part += np.int64(base)
            col.flush()
            del col


_F = ("f_ph", "f_code", "f_track", "f_ts", "f_bp", "f_hint")
_S = ("slices.ts_ns", "slices.dur_ns", "slices.track", "slices.name", "slices.cat", "slices.args")
_I = ("instants.ts_ns", "instants.track", "instants.name", "instants.cat", "instants.args")
_NS = ("slices.ts_ns", "slices.dur_ns", "instants.ts_ns", "counters.ts_ns")
"""The ns columns, written as the pieces come."""
_BASED = ("slices.ts_ns", "instants.ts_ns", "counters.ts_ns")
"""Those with the base added: what `_rebase` moves."""
_DTYPES: dict[str, Any] = {"slices.track": np.int32, "slices.name": np.int32, "slices.cat": np.int32,
                           "slices.args": np.int64, "instants.track": np.int32, "instants.name": np.int32,
                           "instants.cat": np.int32, "instants.args": np.int64, "counters.track": np.int32,
                           "counters.value": np.float64, "f_ph": np.int8, "f_code": np.int64, "f_track": np.int32,
                           "f_ts": np.float64, "f_bp": np.bool_, "f_hint": np.int64}


TRIM_EVERY = 16
"""Pieces parsed between two `_trim`: trimmed after every piece, each piece's parse took its memory anew, pages the
kernel maps and zeroes again (20 GB, the pieces' buffers reused: 3.58M page faults, 0.38M with no trim at all; the
load 58.7 -> 54.8 s, its peak 682 -> 720 MB)."""


def _trim() -> None:
    """Hand the freed pages of the last pieces' parse back to the system (glibc keeps them otherwise: the
    few objects a piece leaves alive, its flow keys, pin the heap around them and RSS grows piece by piece)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def _libc() -> Any:
    try:
        import ctypes

        lib = ctypes.CDLL("libc.so.6")
        return lib if hasattr(lib, "malloc_trim") else None
    except OSError:  # not glibc (macOS, musl): nothing to trim
        return None


_LIBC = _libc()


def _top(prefix: bytes | None, suffix: bytes | None) -> dict[str, Any]:
    """The document's top-level object without traceEvents ({} for the array form or a cut file)."""
    if prefix is None or suffix is None:
        return {}
    try:
        top = orjson.loads(prefix + b"[]" + suffix)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(top, dict):
        return {}
    top.pop("traceEvents", None)
    return top
