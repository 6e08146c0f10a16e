"""The compiled path of the .pftrace loader: the file's packets walked once in C (`_pfscan.c`), filling the
loader's event columns directly, with the rules of `_Reader.packet` (pftrace.py).

The C walk reads TrackEvent packets itself (timestamp, track, type, interned or plain name and category,
counter values, flows, sequence id, flags and clearing) and scalar debug annotations under an interned name;
it hands the rest to `Hooks` with the bytes: interned_data, track descriptors, other annotations (each distinct
block decoded once per sequence, as on the Python path), our metadata instant, and packets that repeat a
message field. Without the extension (no C compiler at install), or with NEURON_PROF_PFTRACE_SCANNER=0, the
loader parses packets with upb in Python (`ENABLED` is False).
"""

from __future__ import annotations

import os
from typing import Any, TypeAlias

import numpy as np
import orjson

from neuron_prof.loaders.pftrace._decode import Seq, fragment
from neuron_prof.loaders.pftrace._decode import whole_packets as _py_whole_packets
from neuron_prof.model import ArgsStore

_Reader: TypeAlias = Any
"""reader._Reader, which imports this module: named loosely here so the two import one way only."""

try:
    from neuron_prof.loaders.pftrace import _pfscan  # type: ignore[attr-defined]  # the C extension: no stub
except ImportError:  # not built: no C compiler when the package was installed
    _pfscan = None

ENABLED = _pfscan is not None and os.environ.get("NEURON_PROF_PFTRACE_SCANNER", "1") != "0"
"""Whether the compiled walk is used (tests switch it off to compare the two paths)."""


def whole_packets(data: bytes) -> int:
    """Length of the longest prefix of `data` made of whole packets (see _pftrace_decode.whole_packets)."""
    return _pfscan.frame(data) if ENABLED else _py_whole_packets(data)


def _oneof_bitmap() -> bytes:
    """TracePacket's `data` oneof as a bitmap of field numbers: the last of them set says a packet's kind."""
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import TracePacket

    bits = bytearray(128)
    for f in TracePacket.DESCRIPTOR.oneofs_by_name["data"].fields:
        if f.number < 1024:
            bits[f.number >> 3] |= 1 << (f.number & 7)
    return bytes(bits)


class Hooks:
    """What the C walk calls back: the loader's sequence tables, string and args stores, and decoders of the
    rare parts with upb."""

    def __init__(self, r: _Reader) -> None:
        from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import (
            DebugAnnotation,
            InternedData,
            TracePacket,
            TrackDescriptor,
        )

        self.r = r
        self.seqs = r.seqs
        self.seq_type = Seq
        self.intern = r.b.strings.intern
        self.dumps = orjson.dumps
        self._annot, self._idd, self._td, self._packet = DebugAnnotation, InternedData, TrackDescriptor, TracePacket

    def interned(self, seq: Seq, raw: bytes) -> None:
        seq.interned(self._idd.FromString(raw), self.intern)

    def descriptor(self, raw: bytes) -> None:
        d = self._td.FromString(raw)
        self.r.descriptors[d.uuid] = d

    def frag(self, seq: Seq, typ: int, raw: bytes) -> bytes | None:
        """One annotation as '"name":value', or None when the event is our metadata instant (read here)."""
        a = self._annot.FromString(raw)
        frag = fragment(a, seq)
        return frag if frag is not None else self.r.meta_fragment(a, seq, typ)

    def packet(self, raw: bytes) -> tuple[Any, ...] | None:
        return self.r.packet(self._packet.FromString(raw))


_DTYPES = (np.uint64, np.uint64, np.int8, np.int32, np.int32, np.int64, np.float64, np.int64, np.uint64, np.int64)


class Walk:
    """The compiled walk over one file, piece by piece (whole packets each): what a packet needs from those
    before it (each sequence's interned data and its clearing, descriptors, metadata) stays in the reader."""

    def __init__(self, r: _Reader) -> None:
        self.hooks = Hooks(r)
        self.oneof = _oneof_bitmap()

    def piece(self, data: bytes | memoryview) -> list[Any]:
        """The event columns of `data`'s packets (event, args and flow indices count from this piece's start):
        ts, uuid, type, name, cat, args, counter values, flow event, flow id, section as arrays, then the args'
        JSON objects back to back (bytes) and where each ends (int64)."""
        cols = _pfscan.scan(data, self.oneof, self.hooks)
        out: list[Any] = [np.frombuffer(c, dt) for c, dt in zip(cols, _DTYPES, strict=False)]
        return [*out, cols[10], np.frombuffer(cols[11], np.int64)]


def scan(r: _Reader, data: bytes) -> None:
    """Walk the packets of `data` (whole packets only) into the reader's columns."""
    (r.ts, r.uuid, r.typ, r.name, r.cat, r.args, r.value, r.flow_ev, r.flow_id, r.flow_sec, blob,
     ends) = Walk(r).piece(data)
    r.arg_store = ArgsStore(blob, np.concatenate([np.zeros(1, np.int64), ends]))
    r.n_events = len(r.ts)
