"""Native Perfetto export: the model -> a TrackEvent .pftrace, streamed to disk chunk by chunk.

    from neuron_prof.exporters.perfetto import write_pftrace
    write_pftrace(trace, "run/trace.pftrace")

File layout (rules: ../shared/design/perfetto-facts.md; every file passes ../shared/tools/pftrace_check.py):

* sequence A (`rank << 8 | 1`): the track descriptors (root, processes, threads, probe tracks, counters,
  overlap lanes), then one instant on the "neuron_prof" track whose debug annotation holds neuron-prof's own
  metadata as JSON (format version, process/track kinds and original pids/tids, lanes, trace.metadata,
  trace.findings, flow id scheme), so `neuron_prof.loaders.pftrace.reader` restores the model exactly.
* sequence B (`rank << 8 | 2`): the events, one chunk at a time: an InternedData packet with the names,
  categories, annotation names and string values first used by the chunk, then the chunk's packets. Slices are
  BEGIN/END pairs sorted per track by (start, -duration); partly overlapping slices move to same-name lane
  tracks. Timestamps are absolute Unix ns without clock fields.
* flows: `flow_ids` on both endpoints, id = model flow id (or row + 1) | (cat, name) combo << 40 | rank << 48.
* findings: instants with the finding's fields as args on a root "findings" track.
* sections: sequence ids, uuids (rank << 32) and flow ids are disjoint per rank, so rank files can follow one
  another in one file; `neuron_prof.exporters.merged` writes merged traces that way, one rank at a time.

Packets are encoded by hand from numpy columns (`_pftrace_wire`): bench/bench_export.py measures this against
building perfetto's proto objects (4-6x faster on the same trace), and tests parse every file back with the
protos. Slices or instants that sit on a counter track go to a same-name lane (trace_processor drops them there).
"""

from __future__ import annotations

import contextlib
import gc
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np
import orjson

from neuron_prof.errors import ExportError
from neuron_prof.exporters import _pftrace_wire as w
from neuron_prof.exporters._pftrace_args import ArgsEncoder
from neuron_prof.exporters._pftrace_layout import (
    Layout,
    place_slices,
    plan,
    process_name,
    process_order,
    track_name,
    track_order,
)
from neuron_prof.exporters._reads import FlowIds, Pages, docs, gather, spill_of
from neuron_prof.model import Trace
from neuron_prof.model.order import sorted_unique
from neuron_prof.model.schema import FORMAT_VERSION, META_KEY, TrackKind
from neuron_prof.model.windows import row_windows

if TYPE_CHECKING:
    from neuron_prof.analysis.spill import Spill
    from neuron_prof.merge import FlowEnds

__all__ = ["write_pftrace", "CHUNK"]

CHUNK = 32_768
"""Events per chunk: bounds the writer's memory (a few tens of MB) whatever the trace size."""
_FLOW_LOW_BITS = 40


def write_pftrace(trace: Trace, path: str | os.PathLike[str], chunk: int = CHUNK) -> Path:
    """Write `trace` as a native Perfetto trace. Writes to a temporary file, then renames (no half files).

    Raises:
        ExportError: the file cannot be written.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        gc_was = gc.isenabled()
        gc.disable()  # the writer makes no cycles; collections over millions of short-lived objects cost ~30%
        try:
            with open(tmp, "wb") as f:
                _Writer(trace, f, chunk).write()
        finally:
            if gc_was:
                gc.enable()
        os.replace(tmp, path)
    except BaseException as e:  # any failure (full disk, a bug, Ctrl-C) leaves no half file behind
        with contextlib.suppress(OSError):  # e.g. the folder is a file: there is no temporary to remove
            tmp.unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise ExportError(f"{path}: cannot write: {e.strerror or e}") from None
        raise
    return path


class _Writer:
    """Writes one trace, or one segment of a merged file (`rank` given: see `neuron_prof.exporters.merged`).

    In a segment, `flow_ends` are this rank's ends of cross-rank flows and `combos` the (cat, name) -> index
    registry shared by all segments, so that one flow id means the same on every rank."""

    def __init__(self, trace: Trace, f: BinaryIO, chunk: int, *, rank: int | None = None,
                 flow_ends: FlowEnds | None = None, combos: dict[tuple[str, str], int] | None = None,
                 t0: int | None = None) -> None:
        self.t = trace
        self.f = f
        self.chunk = max(1, chunk)
        if rank is None:
            rank = trace.rank if trace.rank is not None and 0 <= trace.rank < 1 << 15 else 0
        self.rank = rank
        self.flow_ends = flow_ends
        self.combos = combos
        self.seq_a = rank << 8 | 1
        self.seq_b = rank << 8 | 2
        self.lay: Layout = plan(trace, rank)
        self.args = ArgsEncoder()
        self.names_done = np.zeros(len(trace.strings), bool)
        self.cats_done = np.zeros(len(trace.strings), bool)
        self.first_b = True
        if t0 is None:
            t0, _ = trace.time_range()
        self.t0 = max(t0, 0)
        """Timestamp of the descriptors and of findings without a time of their own."""

    # ---- top level -------------------------------------------------------------------------------
    def write(self) -> None:
        t, lay = self.t, self.lay
        spill = spill_of(t)
        place = place_slices(t, lay, spill.empty if spill is not None else np.empty)
        # a counter track takes only counter values: its instants go to a same-name lane
        it = t.instants
        on_counter = [tr.is_counter for tr in t.tracks]
        for tr in sorted_unique(it.track).tolist():
            if on_counter[tr] and tr not in lay.lane_uuids:
                lay.lane_uuids[tr] = [lay.new_uuid()]
        inst_uuid = [lay.lane_uuids[i][0] if c and i in lay.lane_uuids else int(lay.track_uuid[i])
                     for i, c in enumerate(on_counter)]
        self.instant_uuid = np.array([*inst_uuid, *lay.track_uuid[-1:].tolist()], np.uint64)
        """Per track (and -1: the last track's own uuid): where its instants go."""
        self.counter_uuid = self._counter_uuids()
        flows, flow_meta = self._flows(place.order, spill)
        self.findings_uuid = lay.new_uuid() if t.findings else 0
        self.meta_uuid = lay.new_uuid()
        self._prelude(flow_meta)
        pages = Pages(t, spill)
        for a in range(0, len(place.order), self.chunk):
            z = min(a + self.chunk, len(place.order))
            self._slices(place.order[a:z], place.uuids(a, z), flows)
            pages.done(z - a)
        io = np.lexsort((it.ts_ns, it.track))
        for a in range(0, len(io), self.chunk):
            self._instants(io[a: a + self.chunk])
            pages.done(len(io[a: a + self.chunk]))
        c = t.counters
        co = np.lexsort((c.ts_ns, c.track))
        for a in range(0, len(co), self.chunk):
            self._counters(co[a: a + self.chunk])
            pages.done(len(co[a: a + self.chunk]))
        self._findings()

    def _counter_uuids(self) -> dict[int, int]:
        """Counter track uuid per model track that has samples (a non-counter track gets its own child)."""
        out = {i: int(self.lay.track_uuid[i]) for i, tr in enumerate(self.t.tracks) if tr.is_counter}
        for i in sorted_unique(self.t.counters.track).tolist():
            if i not in out:
                out[i] = self.lay.new_uuid()
        return out

    # ---- flows -------------------------------------------------------------------------------------
    def _flows(self, order: np.ndarray, spill: Spill | None) -> tuple[FlowIds | None, dict[str, Any]]:
        fl, sl, s = self.t.flows, self.t.slices, self.t.strings
        ends = self.flow_ends
        n_ends = len(ends) if ends is not None else 0
        if not len(fl) and not n_ends:
            return None, {}
        pairs = fl.cat.astype(np.int64) << 32 | fl.name.astype(np.int64)
        uniq, inv = np.unique(pairs, return_inverse=True)
        names = [(s[int(p >> 32)], s[int(p & 0xFFFFFFFF)]) for p in uniq.tolist()]
        if self.combos is None:  # a file of its own: its combos are its own
            combos = names
            combo_of = np.arange(len(uniq), dtype=np.int64)
        else:  # a segment of a merged file: one registry for all segments (the last one lists them all)
            combo_of = np.array([self.combos.setdefault(c, len(self.combos)) for c in names], np.int64)
            if ends is not None and n_ends:
                self.combos.setdefault((ends.cat, ends.name), len(self.combos))
            combos = sorted(self.combos, key=self.combos.__getitem__)
        inv = np.minimum(combo_of[inv.reshape(-1)] if len(fl) else np.zeros(0, np.int64), 255).astype(np.uint64)
        # Perfetto id = model id with the (cat, name) combo in bits 40-47, and the rank in bits 48+ when the model
        # ids leave them free (files of several ranks can then be concatenated). Model ids that use bits 40-47
        # (or repeat) are replaced by row + 1. In a merged file the ids already hold their rank (merge ids are
        # rank << 48 | id), so nothing is xor-ed and row ids get the rank instead.
        fid = fl.flow_id
        combo_bits = np.int64(0xFF << _FLOW_LOW_BITS)
        by_model = bool(len(fl) and len(sorted_unique(fid)) == len(fid) and fid.min() >= 0
                        and not (fid & combo_bits).any())
        low = fid.astype(np.uint64) if by_model else np.arange(1, len(fl) + 1, dtype=np.uint64)
        if self.combos is None:
            xor = self.rank << 48 if len(low) and int(low.max()) < 1 << 48 else 0
        else:
            xor = 0
            if not by_model:
                low |= np.uint64(self.rank << 48)
        ids = (low ^ np.uint64(xor)) | (inv << np.uint64(_FLOW_LOW_BITS))
        # which endpoint is the source: the loader takes the earlier one (ts, then file order) unless told
        pos = spill.empty(len(sl), order.dtype) if spill is not None else np.empty(len(sl), order.dtype)
        for a, z in row_windows(self.t, len(order)):
            pos[order[a:z]] = np.arange(a, z, dtype=order.dtype)
        ts = sl.ts_ns
        later = (ts[fl.src] > ts[fl.dst]) | ((ts[fl.src] == ts[fl.dst]) & (pos[fl.src] > pos[fl.dst]))
        del pos
        rows = np.concatenate([fl.src, fl.dst])
        eids = np.concatenate([ids, ids])
        src_later = ids[later]
        if ends is not None and n_ends:
            combo = np.uint64(min(self.combos[(ends.cat, ends.name)], 255)) if self.combos is not None else 0
            xids = ends.flow_id.astype(np.uint64) | (np.uint64(combo) << np.uint64(_FLOW_LOW_BITS))
            rows = np.concatenate([rows, ends.row])
            eids = np.concatenate([eids, xids])
            src_later = np.concatenate([src_later, xids[ends.src_later & ends.is_src]])
        o = np.argsort(rows, kind="stable")
        by_row = (rows[o].astype(order.dtype), eids[o])
        ends_of = FlowIds(*(spill(by_row) if spill is not None else by_row))
        meta = {"combos": [list(c) for c in combos], "ids": "model" if by_model else "row", "xor": xor,
                "src_later": src_later.astype(np.int64).tolist()}
        return ends_of, meta

    # ---- descriptors and metadata ----------------------------------------------------------------------
    def _prelude(self, flow_meta: dict[str, Any]) -> None:
        t, lay, seq = self.t, self.lay, w.fint(w.P_SEQ_ID, self.seq_a)
        ts = w.fint(w.P_TIMESTAMP, self.t0)
        out = [_packet(ts + seq + w.fld(w.P_TRACK_DESCRIPTOR, w.fint(b"\x08", 0) + w.fint(b"\x98\x01", 1))
                       + w.fint(w.P_SEQ_FLAGS, w.SEQ_CLEARED_AND_NEEDS))]

        def desc(body: bytes) -> None:
            out.append(_packet(ts + seq + w.fld(w.P_TRACK_DESCRIPTOR, body)))

        for rank_i, pi in enumerate(process_order(t)):
            p = t.processes[pi]
            pd = w.fint(b"\x08", lay.pids[pi]) + w.fstr(b"\x32", process_name(p, lay.pids[pi]))
            desc(w.fint(b"\x08", lay.process_uuid[pi]) + w.fld(b"\x1a", pd) + w.fint(b"\x58", 3)
                 + w.fint(b"\x60", rank_i) + w.fint(b"\xa0\x01", 1))
        for rank_i, ti in enumerate(track_order(t)):
            tr = t.tracks[ti]
            u, pu, name = int(lay.track_uuid[ti]), lay.process_uuid[tr.process], track_name(tr)
            order_f = w.fint(b"\x60", rank_i)
            if tr.is_counter:
                desc(w.fint(b"\x08", u) + w.fstr(b"\x12", name) + w.fint(b"\x28", pu) + _counter_desc(tr.unit, tr.kind)
                     + order_f)
            elif ti in lay.tids:
                td = w.fint(b"\x08", lay.pids[tr.process]) + w.fint(b"\x10", lay.tids[ti]) + w.fstr(b"\x2a", name)
                desc(w.fint(b"\x08", u) + w.fld(b"\x22", td) + order_f)
            else:
                desc(w.fint(b"\x08", u) + w.fstr(b"\x12", name) + w.fint(b"\x28", pu) + order_f)
            parent = u if ti in lay.tids else pu
            for lu in lay.lane_uuids.get(ti, []):
                desc(w.fint(b"\x08", lu) + w.fstr(b"\x12", name) + w.fint(b"\x28", parent) + order_f)
            cu = self.counter_uuid.get(ti)
            if cu is not None and cu != u:
                desc(w.fint(b"\x08", cu) + w.fstr(b"\x12", name) + w.fint(b"\x28", parent)
                     + _counter_desc(tr.unit, tr.kind) + order_f)
        if self.findings_uuid:
            desc(w.fint(b"\x08", self.findings_uuid) + w.fstr(b"\x12", "findings"))
        desc(w.fint(b"\x08", self.meta_uuid) + w.fstr(b"\x12", META_KEY))
        meta = self._meta_json(flow_meta)
        te = (w.fld(w.E_DEBUG_ANNOTATIONS, w.fstr(w.A_NAME, META_KEY) + w.fld(w.A_STRING, meta))
              + w.fint(w.E_TYPE, w.TYPE_INSTANT) + w.fint(w.E_TRACK_UUID, self.meta_uuid)
              + w.fstr(w.E_NAME, "neuron_prof metadata"))
        out.append(_packet(ts + seq + w.fld(w.P_TRACK_EVENT, te)))
        self.f.write(b"".join(out))

    def _meta_json(self, flow_meta: dict[str, Any]) -> bytes:
        t, lay = self.t, self.lay
        procs = [{"pid": p.pid, "name": p.name, "kind": p.kind, "rank": p.rank, "sort_index": p.sort_index,
                  "labels": p.labels, "uuid": lay.process_uuid[i]} for i, p in enumerate(t.processes)]
        tracks = [{"process": tr.process, "name": tr.name, "kind": tr.kind, "tid": tr.tid,
                   "sort_index": tr.sort_index, "unit": tr.unit, "uuid": int(lay.track_uuid[i]),
                   "lanes": lay.lane_uuids.get(i, []), "counter_uuid": self.counter_uuid.get(i)}
                  for i, tr in enumerate(t.tracks)]
        doc = {"format_version": FORMAT_VERSION, "rank": self.rank, "processes": procs, "tracks": tracks,
               "metadata": t.metadata, "findings": list(t.findings), "findings_uuid": self.findings_uuid,
               "flows": flow_meta}
        opts = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY
        try:
            return orjson.dumps(doc, option=opts, default=repr)
        except TypeError:  # e.g. keys orjson cannot take: fall back to repr for the odd value
            return orjson.dumps(orjson.loads(orjson.dumps(doc, default=str, option=opts)))

    # ---- event chunks ------------------------------------------------------------------------------
    def _interned(self, name_ids: np.ndarray, cat_ids: np.ndarray) -> None:
        """The InternedData packet for what the next chunk uses for the first time (iid = string id + 1)."""
        s = self.t.strings
        body = []
        new_c = sorted_unique(cat_ids[cat_ids > 0])
        new_c = new_c[~self.cats_done[new_c]]
        self.cats_done[new_c] = True
        body += [w.fld(w.I_CATEGORIES, w.fint(b"\x08", i + 1) + w.fstr(b"\x12", s[i])) for i in new_c.tolist()]
        new_n = sorted_unique(name_ids)
        new_n = new_n[~self.names_done[new_n]]
        self.names_done[new_n] = True
        body += [w.fld(w.I_NAMES, w.fint(b"\x08", i + 1) + w.fstr(b"\x12", s[i])) for i in new_n.tolist()]
        body.append(self.args.take_new_interned())
        flags = w.SEQ_CLEARED_AND_NEEDS if self.first_b else w.SEQ_NEEDS
        self.first_b = False
        self.f.write(_packet(w.fint(w.P_SEQ_ID, self.seq_b) + w.fld(w.P_INTERNED, b"".join(body))
                             + w.fint(w.P_SEQ_FLAGS, flags)))

    def _slices(self, rows: np.ndarray, suuid: np.ndarray, flow_ids: FlowIds | None) -> None:
        """BEGIN/END packet pairs for slices `rows` (track uuids `suuid`), encoded as one row per slice: every
        length is computed before any copy."""
        sl, n = self.t.slices, len(rows)
        name, cat, args, ts, dur = gather(self.t, (sl.name, sl.cat, sl.args, sl.ts_ns, sl.dur_ns), rows)
        annots = self.args.encode(*docs(self.t, args))
        seq = w.fint(w.P_SEQ_ID, self.seq_b)
        uuid = w.varint_mat(suuid.view(np.int64), w.E_TRACK_UUID)
        name_m = w.varint_mat(name.astype(np.int64) + 1, w.E_NAME_IID)
        cat_m = w.varint_mat(cat.astype(np.int64) + 1, w.E_CATEGORY_IIDS, cat > 0)
        flows = flow_ids.take(rows) if flow_ids is not None else w.Ragged.empty(n)
        te_len = 2 + name_m.lens + uuid.lens + cat_m.lens + flows.lens + annots.lens
        te_hdr = w.varint_mat(te_len, w.P_TRACK_EVENT)
        start = np.maximum(ts, 0)  # Perfetto timestamps are uint64: before 0 is written as 0
        ts_m = w.varint_mat(start, w.P_TIMESTAMP)
        seq_flags = seq + w.P_SEQ_FLAGS + b"\x02"
        pkt_hdr = w.varint_mat(ts_m.lens + len(seq_flags) + te_hdr.lens + te_len, w.T_PACKET)
        # END: timestamp, sequence, {type, track_uuid}
        tse_m = w.varint_mat(start + np.maximum(dur, 0), w.P_TIMESTAMP)
        te_e_len = 2 + uuid.lens  # < 128: its length prefix is one byte
        pkt_e_hdr = w.varint_mat(tse_m.lens + len(seq) + 2 + te_e_len, w.T_PACKET)
        segs: list[w.Seg] = [pkt_hdr, ts_m, w.Const(seq_flags, n), te_hdr, w.Const(w.E_TYPE + b"\x01", n), name_m,
                             uuid, cat_m, flows, annots,
                             pkt_e_hdr, tse_m, w.Const(seq, n), w.varint_mat(te_e_len, w.P_TRACK_EVENT),
                             w.Const(w.E_TYPE + b"\x02", n), uuid]
        out = w.interleave(segs, n)
        self._interned(name, cat)
        self.f.write(memoryview(out.data))  # type: ignore[arg-type]  # no copy (numpy types __buffer__ for 3.12+)

    def _instants(self, rows: np.ndarray) -> None:
        it, n = self.t.instants, len(rows)
        name, cat, args, track, ts = gather(self.t, (it.name, it.cat, it.args, it.track, it.ts_ns), rows)
        annots = self.args.encode(*docs(self.t, args))
        uuid = w.varint_mat(self.instant_uuid[track].view(np.int64), w.E_TRACK_UUID)
        name_m = w.varint_mat(name.astype(np.int64) + 1, w.E_NAME_IID)
        cat_m = w.varint_mat(cat.astype(np.int64) + 1, w.E_CATEGORY_IIDS, cat > 0)
        te_len = 2 + name_m.lens + uuid.lens + cat_m.lens + annots.lens
        te_hdr = w.varint_mat(te_len, w.P_TRACK_EVENT)
        ts_m = w.varint_mat(np.maximum(ts, 0), w.P_TIMESTAMP)
        seq_flags = w.fint(w.P_SEQ_ID, self.seq_b) + w.P_SEQ_FLAGS + b"\x02"
        pkt_hdr = w.varint_mat(ts_m.lens + len(seq_flags) + te_hdr.lens + te_len, w.T_PACKET)
        out = w.interleave([pkt_hdr, ts_m, w.Const(seq_flags, n), te_hdr, w.Const(w.E_TYPE + b"\x03", n), name_m,
                            uuid, cat_m, annots], n)
        self._interned(name, cat)
        self.f.write(memoryview(out.data))  # type: ignore[arg-type]  # no copy (numpy types __buffer__ for 3.12+)

    def _counters(self, rows: np.ndarray) -> None:
        c, n = self.t.counters, len(rows)
        val = c.value[rows]
        cu = np.zeros(len(self.t.tracks), np.int64)
        for i, u in self.counter_uuid.items():
            cu[i] = u
        integral = np.isfinite(val) & (val == np.round(val)) & (np.abs(val) < 2.0 ** 53)
        ival = np.where(integral, val, 0).astype(np.int64)
        dmat = w.fixed64_mat(val.astype(np.float64), w.E_DOUBLE_COUNTER_VALUE)
        dmat.lens = np.where(integral, 0, dmat.lens)
        imat = w.varint_mat(ival, w.E_COUNTER_VALUE, integral)
        uuid = w.varint_mat(cu[c.track[rows]], w.E_TRACK_UUID)
        te_len = 2 + uuid.lens + imat.lens + dmat.lens
        te_hdr = w.varint_mat(te_len, w.P_TRACK_EVENT)
        ts_m = w.varint_mat(np.maximum(c.ts_ns[rows], 0), w.P_TIMESTAMP)
        seq = w.fint(w.P_SEQ_ID, self.seq_b)
        pkt_hdr = w.varint_mat(ts_m.lens + len(seq) + te_hdr.lens + te_len, w.T_PACKET)
        out = w.interleave([pkt_hdr, ts_m, w.Const(seq, n), te_hdr, w.Const(w.E_TYPE + b"\x04", n), uuid, imat, dmat],
                           n)
        self.f.write(memoryview(out.data))  # type: ignore[arg-type]  # no copy (numpy types __buffer__ for 3.12+)

    def _findings(self) -> None:
        """One instant per finding on the root "findings" track: name = title, args = the finding's fields."""
        if not self.findings_uuid:
            return
        pkts = []
        for fd in self.t.findings:
            ts = fd.get("ts_ns")
            ts = int(ts) if isinstance(ts, (int, float)) and ts > 0 else self.t0
            args = {k: v for k, v in fd.items() if k != "evidence"}
            te = (self.args.annotations(args) + w.fint(w.E_TYPE, w.TYPE_INSTANT)
                  + w.fint(w.E_TRACK_UUID, self.findings_uuid) + w.fstr(w.E_NAME, str(fd.get("title") or "finding")))
            pkts.append(_packet(w.fint(w.P_TIMESTAMP, ts) + w.fint(w.P_SEQ_ID, self.seq_b) + w.fld(w.P_TRACK_EVENT, te)
                                + w.fint(w.P_SEQ_FLAGS, w.SEQ_NEEDS)))
        self._interned(np.zeros(0, np.int32), np.zeros(0, np.int32))
        self.f.write(b"".join(pkts))


def _packet(body: bytes) -> bytes:
    return w.fld(w.T_PACKET, body)


def _counter_desc(unit: str, kind: str) -> bytes:
    """CounterDescriptor (TrackDescriptor field 8): unit 3 = bytes, else a free-text unit name."""
    if unit == "bytes" or (kind == TrackKind.MEMORY and not unit):
        body = w.fint(b"\x18", 3)
    elif unit:
        body = w.fstr(b"\x32", unit)
    else:
        body = b""
    return w.fld(b"\x42", body)
