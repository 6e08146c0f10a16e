"""Decoding helpers of the .pftrace loader: packet framing, per-sequence interning, debug annotations -> JSON."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from neuron_prof.model import dumps_args
from neuron_prof.model.schema import META_KEY


def packet_chunks(data: bytes, target: int = 8 << 20) -> list[tuple[int, int]] | None:
    """Byte ranges of about `target` bytes holding whole packets (Trace field 1), or None if `data` does not
    frame as a sequence of packets."""
    out: list[tuple[int, int]] = []
    pos, n, start = 0, len(data), 0
    while pos < n:
        if data[pos] != 0x0A:
            return None
        pos += 1
        ln = shift = 0
        while True:
            if pos >= n or shift > 63:
                return None
            byte = data[pos]
            pos += 1
            ln |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        pos += ln
        if pos > n:
            return None
        if pos - start >= target:
            out.append((start, pos))
            start = pos
    if start < n:
        out.append((start, n))
    return out


def whole_packets(data: bytes) -> int:
    """Length of the longest prefix of `data` made of whole packets (Trace field 1): where a file cut short
    (a job killed while writing) stops being readable. 0 when `data` does not start as packets."""
    pos, n = 0, len(data)
    while pos < n:
        if data[pos] != 0x0A:
            return pos
        p = pos + 1
        ln = shift = 0
        while True:
            if p >= n or shift > 63:
                return pos
            byte = data[p]
            p += 1
            ln |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        if p + ln > n:
            return pos
        pos = p + ln
    return pos


def text(s: Any) -> str:
    """A proto string field as str: upb hands back bytes when a string is not valid UTF-8."""
    return s if s.__class__ is str else bytes(s).decode("utf-8", "replace")


class Seq:
    """Interning tables and decode caches of one packet sequence."""

    __slots__ = ("names", "cats", "dan", "dsv", "annot_cache", "name_frag", "value_json")

    def __init__(self) -> None:
        self.names: dict[int, int] = {}  # iid -> model string id
        self.cats: dict[int, int] = {}
        self.dan: dict[int, str] = {}
        self.dsv: dict[int, str] = {}
        self.annot_cache: dict[bytes, bytes] = {}  # serialized nested annotation -> JSON fragment '"name":value'
        self.name_frag: dict[int, bytes] = {}  # annotation name iid -> b'"name":'
        self.value_json: dict[int, bytes] = {}  # string value iid -> JSON string

    def interned(self, idd: Any, intern: Callable[[str], int]) -> None:
        """Take in an InternedData message (names and categories as model string ids)."""
        for e in idd.event_names:
            self.names[e.iid] = intern(text(e.name))
        for e in idd.event_categories:
            self.cats[e.iid] = intern(text(e.name))
        for e in idd.debug_annotation_names:
            self.dan[e.iid] = text(e.name)
        for e in idd.debug_annotation_string_values:
            self.dsv[e.iid] = e.str.decode("utf-8", "replace")


def fragment(a: Any, seq: Seq) -> bytes | None:
    """One debug annotation as the JSON text '"name":value'. Scalars are formatted directly (three proto
    reads); strings by iid and nested values by their serialized bytes come from per-sequence caches.
    None for the annotation that holds neuron-prof's metadata."""
    iid = a.name_iid
    nf = seq.name_frag.get(iid) if iid else None
    if nf is None:
        name = seq.dan.get(iid, f"iid {iid}") if iid else text(a.name)
        if name == META_KEY:  # neuron-prof's metadata: the caller reads it
            return None
        nf = orjson.dumps(name) + b":"
        if iid:
            seq.name_frag[iid] = nf
    k = a.WhichOneof("value")
    if k == "int_value":
        return nf + b"%d" % a.int_value
    if k == "string_value_iid":
        sv = seq.value_json.get(a.string_value_iid)
        if sv is None:
            sv = seq.value_json[a.string_value_iid] = orjson.dumps(seq.dsv.get(a.string_value_iid))
        return nf + sv
    if k == "double_value":
        return nf + orjson.dumps(a.double_value)
    if k == "bool_value":
        return nf + (b"true" if a.bool_value else b"false")
    if k == "uint_value":
        return nf + b"%d" % a.uint_value
    if k == "string_value":
        return nf + orjson.dumps(text(a.string_value))
    # nested (dict_entries / array_values), null, legacy JSON, pointers: decoded once per distinct bytes
    key = a.SerializeToString()
    frag = seq.annot_cache.get(key)
    if frag is None:
        frag = nf + dumps_args({"": da_value(a, seq)})[4:-1]
        if len(seq.annot_cache) < 100_000:
            seq.annot_cache[key] = frag
    return frag


def da_name(a: Any, seq: Seq) -> str:
    if a.name_iid:
        return seq.dan.get(a.name_iid, f"iid {a.name_iid}")
    return text(a.name)


def da_value(a: Any, seq: Seq) -> Any:
    k = a.WhichOneof("value")
    if k is None:  # dict_entries and array_values are outside the oneof
        if len(a.array_values):
            return [da_value(x, seq) for x in a.array_values]
        if len(a.dict_entries):
            return {da_name(x, seq): da_value(x, seq) for x in a.dict_entries}
        return None
    if k == "string_value_iid":
        return seq.dsv.get(a.string_value_iid)
    if k == "legacy_json_value":
        try:
            return orjson.loads(a.legacy_json_value)
        except orjson.JSONDecodeError:
            return a.legacy_json_value
    v = getattr(a, k)
    return text(v) if isinstance(v, bytes) else v

