"""Read a native Perfetto TrackEvent trace (.pftrace) into the model.

Packets are walked in C (`_pftrace_scan`, `_pfscan.c`) when that extension is built, else parsed with the
perfetto package's `Trace` proto a few MB at a time; the same Trace either way. Files neuron-prof wrote carry a "neuron_prof" metadata
instant (see neuron_prof.exporters.perfetto) from which processes, tracks (kinds, original pids/tids, overlap
lanes folded back), flows, trace.metadata and trace.findings are restored exactly; other TrackEvent files are
read by the same rules with kinds inferred from the descriptors. Slices come from BEGIN/END pairs per track.

A file may hold several sections, each with its own metadata instant: a `neuron-prof merge` result (one per
rank, then one with the merged metadata and findings) or rank files joined with `cat`. Every section's
processes and tracks are read in file order, metadata and findings add up, and flow ids are decoded with the
scheme of the section (sequence id >> 8 = the writer's rank) that wrote them.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from neuron_prof.errors import TraceFormatError, TraceLoadError
from neuron_prof.loaders.gc_hold import no_gc
from neuron_prof.loaders.pftrace import _scan as _pftrace_scan
from neuron_prof.loaders.pftrace._decode import Seq, da_value, fragment, packet_chunks, text
from neuron_prof.loaders.pftrace._flows import flow_columns
from neuron_prof.loaders.pftrace._tracks import tracks_from_descriptors
from neuron_prof.model import ArgsStore, Trace, TraceBuilder, Track, TrackKind
from neuron_prof.model.order import searchsorted, sorted_unique
from neuron_prof.model.schema import FORMAT_VERSION, META_KEY, Meta

__all__ = ["load_pftrace"]

_B, _E, _I, _C = 1, 2, 3, 4
_CLEARED = 1


def load_pftrace(path: str | os.PathLike[str]) -> Trace:
    """Load a .pftrace file.

    Raises:
        TraceLoadError: unreadable file. TraceFormatError: not a Perfetto trace with TrackEvent data.
    """
    with no_gc():  # a million args and columns are made: the cyclic GC would walk them again and again
        return _load(Path(path))


def _load(p: Path) -> Trace:
    from google.protobuf.message import DecodeError
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace as TraceProto

    try:
        data = p.read_bytes()
    except OSError as e:
        raise TraceLoadError.from_os_error(p, e) from None
    r = _Reader(p)
    try:
        whole = _pftrace_scan.whole_packets(data)
        if 0 < whole < len(data):
            # whole packets, then a cut (a job killed while writing): read the packets, say the rest is lost
            r.lost.append(truncated(len(data), whole))
            r.warnings.extend(r.lost)
            data = data[:whole]
        r.bytes_read = len(data)
        if whole and _pftrace_scan.ENABLED:
            _pftrace_scan.scan(r, data)
        else:
            # Parsed a few MB of packets at a time: upb iterates a small Trace ~30% faster than one huge one, and
            # memory stays bounded. Bytes that do not frame as packets are parsed whole (and rejected there).
            for a, z in (packet_chunks(data) if whole else None) or [(0, len(data))]:
                proto = TraceProto()
                proto.ParseFromString(data[a:z])
                r.read(proto)
                del proto
    except (DecodeError, ValueError, RuntimeError):
        raise TraceFormatError(p, "not a Perfetto trace (protobuf decoding failed)") from None
    except (KeyError, TypeError, IndexError, AttributeError, OverflowError, RecursionError) as e:
        raise TraceFormatError(p, _damaged(e)) from None
    del data
    if not r.n_events and not r.descriptors:
        raise TraceFormatError(p, "not a Perfetto trace (no track events or track descriptors)")
    try:
        return r.build()
    except (KeyError, TypeError, IndexError, AttributeError, OverflowError, ValueError, RecursionError) as e:
        # fields of the wrong type or out of range (a damaged file, or another tool's): one line, not a traceback
        raise TraceFormatError(p, _damaged(e)) from None


def _columns(b: TraceBuilder, **cols: np.ndarray) -> None:
    """Whole columns of the builder set to arrays: TraceBuilder.build takes arrays as they are (np.asarray),
    so a million-row column is not made a list and back."""
    for k, v in cols.items():
        setattr(b, k, v)


def _damaged(e: BaseException) -> str:
    return " ".join(f"damaged Perfetto trace ({type(e).__name__}: {e})".split())[:200]


WRAPPED = "timestamps beyond int64 were read as negative times (uint64 wrap-around)"


def truncated(size: int, whole: int) -> str:
    """The load warning of a file of `size` bytes whose whole packets end at byte `whole`."""
    return (f"file ends inside a packet at byte {size:,} (truncated: was the job killed while writing?); "
            f"read the {whole:,} bytes of whole packets before it")


def signed_times(ts: np.ndarray) -> tuple[np.ndarray, bool]:
    """uint64 timestamps as int64, and whether any was past int64. The wire type is uint64, so a negative time
    written by a writer that wraps (or a hostile file) arrives as 2**64 - t: wrapped back, not failing the file."""
    return ts.view(np.int64), bool(len(ts) and (ts >> np.uint64(63)).any())


def unknown_uuids(uu: np.ndarray, declared: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """The sorted distinct uuids of `uu` neither declared nor skipped."""
    return sorted_unique(uu[~np.isin(uu, declared) & ~np.isin(uu, skip)])


def track_rows(uu: np.ndarray, keys: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """The track row of each uuid of `uu` (-1: none) by the sorted `keys` and their rows `vals`."""
    if not len(keys):
        return np.full(len(uu), -1, np.int64)
    pos = np.minimum(searchsorted(keys, uu), len(keys) - 1)
    return np.where(keys[pos] == uu, vals[pos], -1)


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.b = TraceBuilder()
        self.descriptors: dict[int, Any] = {}
        self.metas: list[dict[str, Any]] = []
        """neuron-prof's metadata instants: one per file, or one per rank and one for the merge in a merged file."""
        self.seqs: dict[int, Seq] = {}
        # Event columns: lists the Python path appends to, or the compiled walk's arrays (_pftrace_scan.scan)
        self.ts: Any = []
        self.uuid: Any = []
        self.typ: Any = []
        self.name: Any = []
        self.cat: Any = []
        self.args: Any = []
        self.value: Any = []  # counters only
        self.flow_ev: Any = []  # event index of each flow endpoint
        self.flow_id: Any = []
        self.flow_sec: Any = []  # file section (writer's rank: sequence id >> 8) of each endpoint
        self.n_events = 0
        self.warnings: list[str] = []
        self.lost: list[str] = []
        """Warnings that mean events were lost (the file was cut short): `metadata["partial"]`."""
        self.bytes_read = 0
        self.arg_store: ArgsStore | None = None
        """The compiled walk's args, all in one store (the Python path adds them to the builder one by one)."""

    # ---- pass over the packets ---------------------------------------------------------------------
    def read(self, proto: Any) -> None:
        """The packets of a parsed Trace into the columns (the Python path; `_pftrace_scan` is the compiled one)."""
        ts_l, uuid_l, typ_l, name_l, cat_l, args_l = self.ts, self.uuid, self.typ, self.name, self.cat, self.args
        packet, add_args = self.packet, self.b.args.add_raw
        for p in proto.packet:
            row = packet(p)
            if row is None:
                continue
            ts, uuid, typ, name, cat, args, value, flows, sid = row
            ts_l.append(ts)
            uuid_l.append(uuid)
            typ_l.append(typ)
            name_l.append(name)
            cat_l.append(cat)
            args_l.append(-1 if args is None else add_args(args))
            if typ == _C:
                self.value.append(value)
            if flows:
                ev = len(ts_l) - 1
                for f in flows:
                    self.flow_ev.append(ev)
                    self.flow_id.append(f)
                    self.flow_sec.append(sid >> 8)
        self.n_events = len(self.ts)

    def packet(self, p: Any) -> tuple[Any, ...] | None:
        """One TracePacket by the loader's rules (_pfscan.c applies the same ones): its event row (ts, track uuid,
        type, name, cat, args as a JSON object or None, counter value, flow ids, sequence id), or None.

        Every proto attribute access costs ~0.15 us here, so a packet is touched as little as possible (END
        packets without sequence flags read four fields), and each distinct serialized debug annotation is
        decoded once per sequence into a JSON fragment; an event's args are the joined fragments."""
        kind = p.WhichOneof("data")
        if kind == "track_event":
            te = p.track_event
            typ = te.type
            if typ == _E and not p.sequence_flags:
                return p.timestamp, te.track_uuid, _E, 0, 0, None, None, (), 0
        sid = p.trusted_packet_sequence_id
        seq = self.seqs.get(sid)
        if seq is None or p.sequence_flags & _CLEARED or p.incremental_state_cleared:
            seq = self.seqs[sid] = Seq()
        intern = self.b.strings.intern
        if p.HasField("interned_data"):
            seq.interned(p.interned_data, intern)
        if kind != "track_event":
            if kind == "track_descriptor":
                d = type(p.track_descriptor)()  # a copy: a reference would keep its chunk's arena alive
                d.CopyFrom(p.track_descriptor)
                self.descriptors[d.uuid] = d
            return None
        if typ not in (_B, _E, _I, _C):
            return None
        if typ == _E:
            name = 0
        elif te.HasField("name_iid"):
            name = seq.names.get(te.name_iid, 0)
        else:
            name = intern(text(te.name)) if te.HasField("name") else 0
        args = None
        annots = te.debug_annotations
        if len(annots) and typ != _E:
            frags = []
            for a in annots:
                frag = fragment(a, seq)
                if frag is None and (frag := self.meta_fragment(a, seq, typ)) is None:
                    return None  # our metadata instant: read, not an event
                frags.append(frag)
            args = b"{" + b",".join(frags) + b"}"
        cats = te.category_iids
        if len(cats):
            cat = seq.cats.get(cats[0], 0)
        else:
            cat = intern(text(te.categories[0])) if len(te.categories) else 0
        value = None
        if typ == _C:
            value = te.double_counter_value if te.HasField("double_counter_value") else float(te.counter_value)
        flows = [*te.flow_ids, *te.terminating_flow_ids] if len(te.flow_ids) or len(te.terminating_flow_ids) else ()
        return p.timestamp, te.track_uuid, typ, name, cat, args, value, flows, sid

    def meta_fragment(self, a: Any, seq: Seq, typ: int) -> bytes | None:
        """The annotation named like neuron-prof's metadata: read on an instant (None: not an event), else an arg."""
        v = da_value(a, seq)
        if typ == _I and isinstance(v, str):
            self._read_meta(v)
            return None
        return orjson.dumps(META_KEY) + b":" + orjson.dumps(v)

    def _read_meta(self, text: str) -> None:
        try:
            m = orjson.loads(text)
        except orjson.JSONDecodeError:
            self.warnings.append("neuron_prof metadata is not JSON; ignored")
            return
        if not isinstance(m, dict) or int(m.get("format_version", 0)) > FORMAT_VERSION:
            self.warnings.append("neuron_prof metadata of a newer format; tracks inferred instead")
            return
        self.metas.append(m)

    # ---- tracks --------------------------------------------------------------------------------------
    def _tracks_from_meta(self) -> dict[int, int]:
        """Processes and tracks of every metadata block, in file order (a merged file has one per rank)."""
        b = self.b
        umap: dict[int, int] = {}
        for m in self.metas:
            pidx = [b.process(pr["pid"], pr["name"], kind=pr["kind"], rank=pr["rank"], sort_index=pr["sort_index"],
                              labels=pr["labels"]) for pr in m["processes"]]
            for t in m["tracks"]:
                i = len(b.tracks)
                b.tracks.append(Track(process=pidx[t["process"]], name=t["name"], kind=t["kind"], tid=t["tid"],
                                      sort_index=t["sort_index"], unit=t["unit"]))
                for u in [t["uuid"], *t["lanes"], t.get("counter_uuid")]:
                    if u is not None:
                        umap[int(u)] = i
        return umap

    # ---- events -> tables ----------------------------------------------------------------------------------
    def track_map(self) -> tuple[dict[int, int], np.ndarray]:
        """uuid -> track row of every declared track (from our metadata, else the descriptors: tracks are made
        here), and the uuids of tracks never shown (our findings track) as a sorted array."""
        umap = self._tracks_from_meta() if self.metas else tracks_from_descriptors(self.b, self.descriptors)
        skip = {int(m.get("findings_uuid") or 0) for m in self.metas} - {0}
        return umap, np.array(sorted(skip), np.uint64)

    def add_unknown(self, umap: dict[int, int], unknown: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One "unknown" track for each of the sorted uuids `unknown` (events on tracks nobody declared); returns
        the lookup arrays of `track_rows` (sorted uuids, their track rows)."""
        if len(unknown):
            b = self.b
            proc = b.process("perfetto", "Perfetto")
            for u in unknown.tolist():
                umap[int(u)] = b.track(proc, f"track {u}", TrackKind.OTHER)
        keys = np.array(sorted(umap), np.uint64)
        return keys, np.array([umap[int(k)] for k in keys.tolist()], np.int64)

    def build(self) -> Trace:
        b = self.b
        umap, skip = self.track_map()
        ts, wrapped = signed_times(np.asarray(self.ts, np.uint64))
        if wrapped:
            self.warnings.append(WRAPPED)
        uu = np.asarray(self.uuid, np.uint64)
        typ = np.asarray(self.typ, np.int8)
        keys, vals = self.add_unknown(umap, unknown_uuids(uu, np.array(sorted(umap), np.uint64), skip))
        tr = track_rows(uu, keys, vals)
        name = np.asarray(self.name, np.int32)
        cat = np.asarray(self.cat, np.int32)
        args = np.asarray(self.args, np.int64)
        slice_of_event = self._slices(ts, tr, typ, name, cat, args)
        ins = np.flatnonzero((typ == _I) & (tr >= 0))
        _columns(b, i_ts=ts[ins], i_track=tr[ins], i_name=name[ins], i_cat=cat[ins], i_args=args[ins])
        cnt = np.flatnonzero(typ == _C)
        keep = tr[cnt] >= 0
        _columns(b, c_ts=ts[cnt][keep], c_track=tr[cnt][keep], c_value=np.asarray(self.value, np.float64)[keep])
        ev = np.asarray(self.flow_ev, np.int64)
        self.flows(ts[ev], slice_of_event[ev])
        self.finish_meta()
        trace = b.build()
        return trace if self.arg_store is None else dataclasses.replace(trace, args=self.arg_store)

    def flows(self, ev_ts: np.ndarray, ev_row: np.ndarray) -> None:
        """The flow columns from the endpoints read, given each endpoint's event time and slice row."""
        if len(self.flow_id):
            flow_columns(self.b, self.metas, np.asarray(self.flow_ev, np.int64), np.asarray(self.flow_id, np.uint64),
                         np.asarray(self.flow_sec, np.int64), ev_ts, ev_row)

    def finish_meta(self) -> None:
        """trace.metadata and findings from every metadata block, the source, and what the read lost or warned."""
        b = self.b
        for m in self.metas:
            b.metadata.update(m.get("metadata") or {})
            b.findings.extend(m.get("findings") or [])
        b.metadata[Meta.SOURCE] = str(self.path)
        b.metadata[Meta.SOURCE_FORMAT] = "pftrace"
        b.metadata.pop(Meta.PARTIAL, None)  # an earlier read's; this one's follows
        if self.lost:
            b.metadata[Meta.PARTIAL] = {"truncated": True, "problems": list(self.lost), "bytes_read": self.bytes_read}
        if self.warnings:
            b.metadata[Meta.WARNINGS] = list(b.metadata.get(Meta.WARNINGS) or []) + self.warnings

    def _slices(self, ts: np.ndarray, tr: np.ndarray, typ: np.ndarray, name: np.ndarray, cat: np.ndarray,
                args: np.ndarray) -> np.ndarray:
        """Pair BEGIN/END per track into slices; returns the slice row of each BEGIN event (-1 elsewhere)."""
        n = len(ts)
        bi = np.flatnonzero(typ == _B)
        ei = np.flatnonzero(typ == _E)
        nxt = np.minimum(bi + 1, max(n - 1, 0))
        # neuron-prof writes each END right after its BEGIN: pair them without a walk
        if len(bi) == len(ei) and (len(bi) == 0 or (np.all(bi + 1 < n) and np.all(typ[nxt] == _E)
                                                     and np.all(tr[nxt] == tr[bi]))):
            end = ts[nxt] if len(bi) else ts[:0]
        else:
            bi, end = self._pair_walk(ts, tr, typ)
        keep = tr[bi] >= 0
        bi, end = bi[keep], end[keep]
        b = self.b
        _columns(b, s_ts=ts[bi], s_dur=end - ts[bi], s_track=tr[bi], s_name=name[bi], s_cat=cat[bi], s_args=args[bi])
        row = np.full(n, -1, np.int64)
        row[bi] = np.arange(len(bi))
        return row

    def _pair_walk(self, ts: np.ndarray, tr: np.ndarray, typ: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """General files: sort BEGIN/END by (track, ts, file order) and match with a stack per track."""
        idx = np.flatnonzero((typ == _B) | (typ == _E))
        o = idx[np.lexsort((idx, ts[idx], tr[idx]))]
        begins: list[int] = []
        ends: list[int] = []
        stack: list[int] = []
        cur = None
        last_ts = int(ts.max()) if len(ts) else 0
        unmatched = 0
        for i, t, ty, tk in zip(o.tolist(), ts[o].tolist(), typ[o].tolist(), tr[o].tolist()):
            if tk != cur:
                for s in stack:  # left open: close at the end of the trace
                    begins.append(s)
                    ends.append(last_ts)
                stack = []
                cur = tk
            if ty == _B:
                stack.append(i)
            elif stack:
                begins.append(stack.pop())
                ends.append(t)
            else:
                unmatched += 1
        for s in stack:
            begins.append(s)
            ends.append(last_ts)
        if unmatched:
            self.warnings.append(f"{unmatched} slice ends without a begin were ignored")
        bi = np.asarray(begins, np.int64)
        o2 = np.argsort(bi, kind="stable")
        return bi[o2], np.asarray(ends, np.int64)[o2]
