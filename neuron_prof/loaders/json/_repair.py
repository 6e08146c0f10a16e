"""Parsing pieces of a Chrome JSON document with the repairs real traces need, for the reader (`_json_read`):
invalid UTF-8 and raw control characters inside strings are fixed in place (byte positions stay), NaN,
Infinity and out-of-range numbers are accepted through the standard library's parser; every repair and every
loss of events is said once in `warnings` (losses also in `lost`, for `metadata["partial"]`)."""

from __future__ import annotations

import codecs
import json
import mmap
from pathlib import Path
from typing import Any

import orjson

_DECODER = json.JSONDecoder()


def _byte_pos(doc: bytes | bytearray, char_pos: int) -> int:
    """orjson reports error positions in characters; the reader works in bytes (they differ after any
    non-ASCII text, e.g. "µs" in a finding's title)."""
    head = bytes(doc[:char_pos])
    if head.isascii():
        return char_pos
    text = bytes(doc).decode("utf-8", errors="replace")
    return len(text[:char_pos].encode("utf-8"))


_CONTROL_TO_SPACE = bytes.maketrans(bytes(range(32)), b" " * 32)


class Repairs:
    """The document's bytes (`raw`, repaired in place: it becomes a bytearray on the first repair) and what
    was repaired or lost, in words."""

    def __init__(self, raw: bytes | bytearray | mmap.mmap, path: Path) -> None:
        self.raw = raw
        self.path = path
        self.warnings: list[str] = []
        self.lost: list[str] = []
        """The warnings that mean events were lost (truncation, skipped or unreadable damage): `partial`."""
        self.truncated = False
        """Whether the end of the events is missing (the file was cut short)."""
        self._open_end: int | None = None
        """Where the value ended, after an "open" parse that the standard library's parser took."""

    def _parse(self, lo: int, hi: int, wrap: str) -> tuple[Any, int, bool, str]:
        """Parse raw[lo:hi] (wrap "both": as `[` + it + `]`; "open": `[` + it; "none": as is). Returns (value or None, raw index of the error,
        whether the error is at the very end (a cut in the wrong place, or truncation), reason).

        Repairs what real traces hold: invalid UTF-8 (each bad byte becomes "?", in place, so positions
        stay) and NaN/Infinity/out-of-range numbers (the standard library's parser accepts them)."""
        off = lo if wrap == "none" else lo - 1
        repaired: set[str] = set()
        while True:
            body = self.raw[lo:hi]
            doc = body if wrap == "none" else (b"[" + body + b"]") if wrap == "both" else (b"[" + body)
            try:
                return orjson.loads(doc), -1, False, ""
            except orjson.JSONDecodeError as e:
                epos, msg = _byte_pos(doc, e.pos), e.msg
            if "UTF-8" in msg and "utf8" not in repaired:
                repaired.add("utf8")
                self._repair_utf8(lo, hi)
                continue
            if "control character" in msg and "control" not in repaired:
                repaired.add("control")
                self._repair_control(lo, hi)
                continue
            break
        short = epos >= len(doc) - 1
        bad = off + epos
        if not short and (self.raw[bad:bad + 9].lstrip(b"-").startswith((b"NaN", b"Infinity"))
                          or "infinity" in msg or "number" in msg):
            try:
                text = bytes(doc).decode("utf-8")
                # the standard library accepts NaN, Infinity and numbers of any size; raw_decode stops where
                # the value ends, as the last piece goes on with the rest of the document
                v, end = _DECODER.raw_decode(text)
                if wrap == "open":
                    self._open_end = off + len(text[:end].encode())
                elif text[end:].strip():
                    raise ValueError("trailing data")
                self._warn_once("non-standard JSON (NaN, Infinity or out-of-range numbers) accepted")
                return v, -1, False, ""
            except (ValueError, RecursionError):
                pass
        return None, bad, short, msg

    def _repair_utf8(self, lo: int, hi: int) -> None:
        if isinstance(self.raw, bytes):
            self.raw = bytearray(self.raw)  # one copy, only for files with bad bytes
        self.raw[lo:hi] = bytes(self.raw[lo:hi]).decode("utf-8", errors="neuron_prof_qmark").encode()
        self._warn_once("invalid UTF-8 bytes replaced by '?'")

    def _repair_control(self, lo: int, hi: int) -> None:
        # Kineto writes raw control characters (tabs, newlines, \x01...) into names and call stacks, which
        # JSON forbids inside strings. Outside strings they are whitespace, so a space keeps the document's
        # meaning and every byte position.
        if isinstance(self.raw, bytes):
            self.raw = bytearray(self.raw)
        self.raw[lo:hi] = bytes(self.raw[lo:hi]).translate(_CONTROL_TO_SPACE)
        self._warn_once("control characters inside strings replaced by spaces")

    def _warn_once(self, msg: str) -> None:
        if msg not in self.warnings:
            self.warnings.append(msg)

    def _lose(self, msg: str, *, truncated: bool) -> None:
        """A warning that events were lost (kept in `lost` too); `truncated`: the file's end is missing."""
        self._warn_once(msg)
        if msg not in self.lost:
            self.lost.append(msg)
        self.truncated = self.truncated or truncated


def _qmark(err: UnicodeError) -> tuple[str, int]:
    assert isinstance(err, UnicodeDecodeError)
    return "?" * (err.end - err.start), err.end


codecs.register_error("neuron_prof_qmark", _qmark)
