""".pftrace bigger than memory: read once, in pieces of whole packets, straight into a column folder.

    if stream_wanted(path): ingest(path, folder, key)     # then neuron_prof.loaders.coldir.read_trace(folder)

A .pftrace is a sequence of length-delimited TracePackets: the file is cut into pieces of about 64 MB
(NEURON_PROF_STREAM_PIECE_MB, as for JSON) at packet boundaries, and the compiled walk (`_scan.Walk`) turns
each piece into raw event columns appended to files. What a packet needs from those before it stays in the
reader across pieces, exactly as in one read: each sequence's interned names, categories and annotation names
by trusted_packet_sequence_id (a packet with SEQ_INCREMENTAL_STATE_CLEARED or incremental_state_cleared starts
its sequence afresh, wherever the cut), the track descriptors and neuron-prof's metadata blocks. Tracks are
known only once the file is read (a descriptor or the metadata instant may follow the events), so the raw
columns are then read back a bounded number of rows at a time (read, not mapped: the pages stay out of the
resident set) and made the Trace's tables: track rows, BEGIN/END pairs (an END right after its BEGIN, as
neuron-prof writes them), instants, counters. Flow endpoints go to columns too (with their event's time and
slice row once the tables are made) and are paired in windows of flow ids (`spill`: a window's endpoints and
arrows in memory at a time). Held in memory: the interning tables and, for a file whose ENDs do not follow
their BEGINs, the pairing walk over its BEGIN/END events (and a row per flow endpoint). The Trace is the one `load_pftrace` gives (the same columns, ids, args
and metadata).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from neuron_prof.errors import TraceFormatError
from neuron_prof.loaders import spill
from neuron_prof.loaders.coldir import ARGS, TABLES, ColumnWriter, trace_head, write_strings
from neuron_prof.loaders.gc_hold import no_gc
from neuron_prof.loaders.json import stream as json_stream
from neuron_prof.loaders.pftrace import _scan
from neuron_prof.loaders.pftrace._flows import named_ids, pair_by_id, section_names
from neuron_prof.loaders.pftrace.reader import (
    WRAPPED,
    _damaged,
    _Reader,
    track_rows,
    truncated,
    unknown_uuids,
)
from neuron_prof.loaders.spill import Spill, sample_step, splitters, window_of
from neuron_prof.model import drop_mapped
from neuron_prof.model.order import searchsorted, sorted_unique

__all__ = ["PER_BYTE", "check_room", "ingest", "stream_wanted"]

PER_BYTE = 4.0
"""Memory the in-memory load needs per byte of .pftrace (measured: 3.0x the file, 3,153 MB for 1.06 GB)."""
_ROWS = 1 << 20
"""Events made table rows at a time."""
_B, _E, _I, _C = 1, 2, 3, 4
_EV = {"e_ts": np.uint64, "e_uuid": np.uint64, "e_typ": np.int8, "e_name": np.int32, "e_cat": np.int32,
       "e_args": np.int64, "e_value": np.float64}
"""The walk's raw event columns, in its order (values: counters only), kept until the tables are made."""
_FE = {"pf_ev": np.int64, "pf_id": np.uint64, "pf_sec": np.int64, "pf_ts": np.int64, "pf_row": np.int64}
"""Flow endpoints' columns: event index in the file, flow id, section (as the walk gives them), then the event's
time and slice row (-1: none), kept until the flow columns are made."""
_END = np.dtype(list(_FE.items()))
_ARROW = np.dtype([("src", np.int64), ("dst", np.int64), ("id", np.uint64), ("sec", np.int64)])


def stream_wanted(path: Path) -> bool:
    """Whether the .pftrace `path` should be streamed (NEURON_PROF_STREAM, else its in-memory load would need
    more than half the room left); never without the compiled walk."""
    return _scan.ENABLED and json_stream.stream_wanted(path, PER_BYTE)


def check_room(path: Path) -> None:
    """OutOfMemoryError (one line) before the parse when loading `path` in memory cannot fit the limits."""
    json_stream.check_room(path, PER_BYTE)


def ingest(path: Path, folder: Path, key: str, piece: int | None = None) -> None:
    """Read the .pftrace `path` into the column folder `folder` (`neuron_prof.loaders.coldir`), in pieces of
    about `piece` bytes (default: NEURON_PROF_STREAM_PIECE_MB, else PIECE_BYTES).

    Raises:
        TraceFormatError: not a Perfetto trace with TrackEvent data, or damaged.
    """
    from google.protobuf.message import DecodeError

    with no_gc():
        ing = _Ingest(path, folder)
        with ing.w.closed_on_failure():
            try:
                ing.read(piece or json_stream.piece_bytes())
            except (DecodeError, ValueError, RuntimeError):
                raise TraceFormatError(path, "not a Perfetto trace (protobuf decoding failed)") from None
            except (KeyError, TypeError, IndexError, AttributeError, OverflowError, RecursionError) as e:
                raise TraceFormatError(path, _damaged(e)) from None
            if not ing.n and not ing.r.descriptors:
                raise TraceFormatError(path, "not a Perfetto trace (no track events or track descriptors)")
            try:
                ing.tables(key)
            except (KeyError, TypeError, IndexError, AttributeError, OverflowError, ValueError, RecursionError) as e:
                raise TraceFormatError(path, _damaged(e)) from None


class _Ingest:
    def __init__(self, path: Path, folder: Path) -> None:
        self.path = path
        self.w = ColumnWriter(folder)
        self.r = _Reader(path)
        self.n = 0
        """Events so far."""
        self.n_args = 0
        self.blob = 0

    def read(self, size: int) -> None:
        """Every piece walked into the raw columns."""
        w = self.w
        w.append("args_off", np.zeros(1, np.int64))
        walk = _scan.Walk(self.r)
        for piece in _pieces(self.path, size, self.r):
            cols = walk.piece(piece)
            del piece
            *ev, fev, fid, fsec, blob, ends = cols
            ev[5] = np.where(ev[5] >= 0, ev[5] + self.n_args, -1)
            for name, a in zip(_EV, ev, strict=True):
                w.append(name, a, _EV[name])
            w.append(ARGS, blob)
            w.append("args_off", ends + self.blob)
            for name, a in zip(("pf_ev", "pf_id", "pf_sec"), (fev + self.n, fid, fsec), strict=True):
                w.append(name, a, _FE[name])  # flow endpoints: event index (in the file), flow id, section
            self.blob += len(blob)
            self.n_args += len(ends)
            self.n += len(ev[0])
            del cols, ev, blob, ends

    def tables(self, key: str) -> None:
        """The raw columns made the Trace's tables, a bounded number of rows at a time, and the head written."""
        r, w, n = self.r, self.w, self.n
        for name, dt in _EV.items():
            w.declare(name, dt)
            w.flush(name)
        umap, skip = r.track_map()
        declared = np.array(sorted(umap), np.uint64)
        unknown, wrapped = [np.zeros(0, np.uint64)], False
        for k in range(0, n, _ROWS):
            unknown.append(unknown_uuids(self._read("e_uuid", k, k + _ROWS), declared, skip))
            wrapped = wrapped or bool((self._read("e_ts", k, k + _ROWS) >> np.uint64(63)).any())
        keys, vals = r.add_unknown(umap, sorted_unique(np.concatenate(unknown)))
        if wrapped:
            r.warnings.append(WRAPPED)
        for name, dt in _FE.items():
            w.declare(name, dt)
        fev = w.mapped("pf_ev")
        for t, cls in TABLES.items():
            for c, dt in cls.DTYPES.items():
                w.declare(f"{t}.{c}", dt)
        w.declare("e_tr", np.int32)
        if not self._rows(keys, vals, fev):  # ENDs not right after their BEGINs: paired by the walk over them all
            w.drop("pf_row")
            w.append("pf_row", self._pair_walk(fev), np.int64)
        del fev
        self._flows()
        b = r.b
        r.finish_meta()
        trace = b.build()
        write_strings(w, trace.strings.as_list())
        for name in (*_EV, "e_tr", *_FE):
            w.drop(name)
        w.close(trace_head(trace, key))

    def _rows(self, keys: np.ndarray, vals: np.ndarray, fev: np.ndarray) -> bool:
        """Instants, counters and (when every END follows its BEGIN on the same track) slices appended; each
        flow endpoint's event time and slice row to columns pf_ts and pf_row; returns whether the slices were
        made (else pf_row is not whole)."""
        w, n = self.w, self.n
        rows = counters = n_b = n_e = 0
        pairs = True
        for k in range(0, n, _ROWS):
            z = min(n, k + _ROWS)
            m, z1 = z - k, min(n, z + 1)  # one event past the step: the END of a BEGIN at its end
            ts = self._read("e_ts", k, z1).view(np.int64)
            typ = self._read("e_typ", k, z1)
            tr = track_rows(self._read("e_uuid", k, z1), keys, vals)
            name, cat, args = (self._read(c, k, z) for c in ("e_name", "e_cat", "e_args"))
            w.append("e_tr", tr[:m], np.int32)
            t = typ[:m]
            lo, hi = searchsorted(fev, (k, z))
            at = fev[lo:hi] - k
            w.append("pf_ts", ts[at], np.int64)
            bi = np.flatnonzero(t == _B)
            n_b += len(bi)
            n_e += int(np.count_nonzero(t == _E))
            nxt = bi + 1
            if pairs and len(bi) and (nxt[-1] >= len(typ) or not (typ[nxt] == _E).all()
                                      or not (tr[nxt] == tr[bi]).all()):
                pairs = False
            if pairs:
                bi = bi[tr[bi] >= 0]
                s_ts = ts[bi]
                self._append("slices", ts_ns=s_ts, dur_ns=ts[bi + 1] - s_ts, track=tr[bi], name=name[bi],
                             cat=cat[bi], args=args[bi])
                row = np.full(m, -1, np.int64)
                row[bi] = np.arange(rows, rows + len(bi))
                rows += len(bi)
                w.append("pf_row", row[at], np.int64)
            ins = np.flatnonzero((t == _I) & (tr[:m] >= 0))
            self._append("instants", ts_ns=ts[ins], track=tr[ins], name=name[ins], cat=cat[ins], args=args[ins])
            cnt = np.flatnonzero(t == _C)
            keep = tr[cnt] >= 0
            value = self._read("e_value", counters, counters + len(cnt))
            counters += len(cnt)
            self._append("counters", ts_ns=ts[cnt][keep], track=tr[cnt][keep], value=value[keep])
        return pairs and n_b == n_e

    def _pair_walk(self, fev: np.ndarray) -> np.ndarray:
        """Slices of a file whose ENDs do not follow their BEGINs, by the in-memory load's walk (its memory
        grows with the BEGIN/END events); returns each flow endpoint's slice row."""
        w = self.w
        for c in TABLES["slices"].DTYPES:
            w.drop(f"slices.{c}")
            w.declare(f"slices.{c}", TABLES["slices"].DTYPES[c])
        w.declare("e_tr", np.int32)
        w.flush("e_tr")
        col = {name: w.mapped(name) for name in _EV}
        ts, tr, typ = col["e_ts"].view(np.int64), w.mapped("e_tr"), col["e_typ"]
        bi, end = self.r._pair_walk(ts, tr, typ)
        keep = tr[bi] >= 0
        bi, end = bi[keep], end[keep]
        for k in range(0, len(bi), _ROWS):
            b, s_ts = bi[k:k + _ROWS], ts[bi[k:k + _ROWS]]
            self._append("slices", ts_ns=s_ts, dur_ns=end[k:k + _ROWS] - s_ts, track=tr[b], name=col["e_name"][b],
                         cat=col["e_cat"][b], args=col["e_args"][b])
        if not len(bi):
            return np.full(len(fev), -1, np.int64)
        pos = np.minimum(searchsorted(bi, fev), len(bi) - 1)
        return np.where(bi[pos] == fev, pos, -1)

    def _flows(self) -> None:
        """The flow columns from the endpoints' columns (`_flows.flow_columns`), in windows of flow ids: each
        window's endpoints paired, its arrows kept in a file, then named and appended in order."""
        w, r = self.w, self.r
        m = w.rows("pf_ev")
        if not m:
            return
        cols = [w.mapped(name) for name in _FE]
        size = spill.WINDOW
        cut = splitters(np.asarray(cols[1][::sample_step(m)]), m, size)
        with Spill(w.folder, _END, len(cut) + 1) as ends, Spill(w.folder, _ARROW, len(cut) + 1) as arrows:
            for a in range(0, m, size):
                e = np.empty(min(size, m - a), _END)
                for col, c in zip(_FE, cols, strict=True):
                    e[col] = c[a:a + size]
                    drop_mapped(c)
                ends.add(window_of(e["pf_id"], cut), e)
            sections: set[int] = set()
            for k in range(len(cut) + 1):
                e = ends.take(k)
                src, dst, ids, sec = pair_by_id(r.metas, e["pf_ev"], e["pf_id"], e["pf_sec"], e["pf_ts"], e["pf_row"])
                sections.update(sorted_unique(sec).tolist())
                got = np.empty(len(src), _ARROW)
                got["src"], got["dst"], got["id"], got["sec"] = src, dst, ids, sec
                arrows.add(np.full(len(got), k), got)
            names = section_names(r.b, r.metas, sorted(sections))
            dt = TABLES["flows"].DTYPES
            for k in range(len(cut) + 1):
                got = arrows.take(k)
                model_id, f_cat, f_name = named_ids(names, got["id"], got["sec"])
                for fc, v in (("src", got["src"]), ("dst", got["dst"]), ("flow_id", model_id), ("cat", f_cat),
                              ("name", f_name)):
                    w.append(f"flows.{fc}", v, dt[fc])

    def _read(self, name: str, start: int, stop: int) -> np.ndarray:
        """Rows [start, stop) of raw column `name` (flushed), read into memory: not mapped, so the pages read
        stay in the page cache, out of this process's resident set."""
        dtype = np.dtype(_EV[name])
        stop = min(stop, self.w.rows(name))
        if stop <= start:
            return np.zeros(0, dtype)
        return np.fromfile(self.w.folder / name, dtype, count=stop - start, offset=start * dtype.itemsize)

    def _append(self, table: str, **cols: np.ndarray) -> None:
        dtypes = TABLES[table].DTYPES
        for c, a in cols.items():
            self.w.append(f"{table}.{c}", a, dtypes[c])


def _header(buf: bytes, at: int) -> tuple[int, int] | None:
    """(header bytes, body bytes) of the packet at `buf[at:]`: None when those bytes are no packet's start
    (`_decode.whole_packets` stops there), (0, 0) when `buf` ends inside the header."""
    if buf[at] != 0x0A:
        return None
    p, ln, shift = at + 1, 0, 0
    while True:
        if shift > 63:
            return None
        if p >= len(buf):
            return 0, 0
        byte = buf[p]
        p += 1
        ln |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return p - at, ln


def _pieces(path: Path, size: int, r: _Reader) -> Iterator[memoryview]:
    """Pieces of about `size` bytes of whole packets; a cut (the file ends inside a packet, or bytes that are
    no packet follow) ends them with the in-memory load's warning, in `r`."""
    with open(path, "rb") as f:
        total = os.fstat(f.fileno()).st_size
        at, need = 0, size
        while at < total:
            f.seek(at)
            buf = f.read(need)
            whole = _scan.whole_packets(buf)
            if whole:
                yield memoryview(buf)[:whole]
                at += whole
            if whole == len(buf):
                need = size
                continue
            head = _header(buf, whole)
            if head is None or at + sum(head) > total or at + len(buf) - whole >= total:
                if at == 0:  # not packets from the first byte: not a Perfetto trace
                    raise ValueError("no packet at byte 0")
                r.lost.append(truncated(total, at))
                r.warnings.append(r.lost[-1])
                break
            need = size if whole else max(size, sum(head), 2 * len(buf) if head == (0, 0) else 0)
        r.bytes_read = at
