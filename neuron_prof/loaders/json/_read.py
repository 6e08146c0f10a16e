"""Read a Chrome/Kineto JSON file as a stream of event chunks, surviving truncation and damage.

Parsing the whole document with orjson costs about 2 kB of Python objects per event (2.4 GB and 8 s
for a 1.2M-event trace here); parsing `traceEvents` a few megabytes at a time and turning each piece into
columns at once costs 360 MB and 2.3 s. Chunks are cut at `}` `,` `{` between array elements; a cut
that falls inside a string or a nested value makes that piece fail to parse, and it is then widened.

    reader = JsonEventReader(raw, path)
    for events in reader.chunks():      # lists of event dicts (anything JSON, really)
        ...
    reader.top                          # the top-level object without traceEvents ({} for array form)
    reader.warnings                     # what was skipped or repaired, in words
"""

from __future__ import annotations

import mmap
import os
import re
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any, Literal, overload

import orjson

from neuron_prof.errors import TraceFormatError
from neuron_prof.loaders.json._repair import Repairs
from neuron_prof.loaders.json._scan import Ahead, scan_chunk, scan_enabled
from neuron_prof.loaders.json._typed import decode_chunk
from neuron_prof.loaders.json.fill import Fill

CHUNK_BYTES = 4 << 20
"""Target size of one parsed piece: small enough that its dicts die young (the Python path), large enough that
the Python work per piece and the GIL's hand-overs between the scanning threads and the caller stay small
(the compiled scanner: 1 MB pieces cost 0.1 s more of the main thread's time on 344 MB). Both paths cut the
same pieces, as the order in which tracks come into being follows the pieces."""

_SEP = re.compile(rb"\}\s*,\s*\{")
_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_WS = b" \t\r\n"
_MAX_BACKTRACK = 8
THREADS = min(os.cpu_count() or 1, 4)
"""Threads scanning pieces ahead (compiled scanner only; 1: none)."""


class JsonEventReader(Repairs):
    """Splits a Chrome JSON document into parsed chunks of `traceEvents` (see the module docstring)."""

    def __init__(self, raw: bytes | bytearray | mmap.mmap, path: Path, chunk_bytes: int | None = None,
                 typed: bool = False, fill: Fill | None = None) -> None:
        super().__init__(raw if fill is None else fill.raw, path)
        self._fill = fill
        """The file still being read into `raw` by a thread (`_json_fill`); None once it is all there."""
        self.bytes_read = len(self.raw)
        self.typed = typed
        """Try the fast path first (`_json_typed`: chunks may be TypedChunks, for EventColumns only)."""
        self.chunk_bytes = CHUNK_BYTES if chunk_bytes is None else chunk_bytes
        self.top: dict[str, Any] = {}
        self.entries = 0
        """Elements of traceEvents seen (parsed), whatever they are."""
        self.array_end: int | None = None
        """Index of the closing ']' of traceEvents once `chunks()` is exhausted (None: not closed)."""
        self.suffix: bytes | None = None
        """What follows that ']' (the rest of the top-level object)."""
        self._ahead: Ahead | None = None
        self._array_form = False
        """Whether the document is the bare array of events (no top-level object around it)."""

    # ---- a file still being read ------------------------------------------------------------------
    def _avail(self, k: int) -> int:
        """Bytes of the file in `raw`, at least `k` unless it is shorter (waits for the reading thread)."""
        if self._fill is None:
            return len(self.raw)
        got = self._fill.need(k)
        if self._fill.done:
            self.raw, self._fill = self._fill.raw, None
            return len(self.raw)
        return got

    def _all(self) -> int:
        return self._avail(len(self.raw) + 1)

    @overload
    def _sep(self, start: int, wait: Literal[True] = ...) -> re.Match[bytes] | None: ...
    @overload
    def _sep(self, start: int, wait: bool) -> re.Match[bytes] | None | Literal[False]: ...

    def _sep(self, start: int, wait: bool = True) -> re.Match[bytes] | None | Literal[False]:
        """The first separator at or after `start`, as `_SEP.search` on the whole file finds it (None: none).
        While the file is read, waits for more bytes; without `wait`, False when they are not read yet."""
        k = start + (1 << 20)
        while self._fill is not None:
            avail = self._avail(k) if wait else self._fill.ready
            m = _SEP.search(self.raw, start, avail) if start < avail else None
            if m is not None:
                return m
            if self._fill is not None and not wait:
                return False
            k = max(2 * k, avail + (4 << 20))
        return _SEP.search(self.raw, start) if start < len(self.raw) else None

    # ---- the document's frame --------------------------------------------------------------------
    def _frame(self) -> tuple[int, int | None] | list[Any]:
        """(index after the array's '[', start of the top-level object or None for array form);
        or the list of events when the whole document had to be parsed at once."""
        if self._fill is not None:
            head = self._avail(1 << 20)
            if self._fill is not None:
                got = self._frame_in(head)
                if got is not None:
                    return got
            self._all()
        got = self._frame_in(len(self.raw))
        assert got is not None
        return got

    def _frame_in(self, n: int) -> tuple[int, int | None] | list[Any] | None:
        """_frame on raw[:n] (None: not decided within it, while the file is read)."""
        partial = n < len(self.raw)
        raw = self.raw
        i = 0
        if raw[:3] == b"\xef\xbb\xbf":  # a UTF-8 byte-order mark, as some Windows tools write
            i = 3
        while i < n and raw[i] in _WS:
            i += 1
        if partial and i >= n - 1:
            return None
        if i == n:
            raise TraceFormatError(self.path, "empty file" if n == 0 else "file holds only whitespace")
        c = raw[i]
        if c == ord("["):
            return (i + 1, None)
        if c != ord("{"):
            raise TraceFormatError(self.path, f"not JSON (starts with byte 0x{c:02x}); not a Chrome/Kineto trace")
        m = _KEY.search(raw, i, n)
        if m is not None:
            # Is this the top-level key? The prefix with an empty array must close as an object.
            try:
                top = orjson.loads(bytes(raw[i:m.end() - 1]) + b"[]}")
                if isinstance(top, dict):
                    return (m.end(), i)
            except orjson.JSONDecodeError:
                pass
        return None if partial else self._whole(i)

    def _whole(self, i: int) -> list[Any]:
        """Parse the document in one go: for layouts the chunker does not recognise."""
        doc, bad, _, msg = self._parse(i, len(self.raw), "none")
        if doc is None:
            raise TraceFormatError(self.path, f"not valid JSON ({msg} at byte {bad:,})")
        if isinstance(doc, list):
            return doc
        if not isinstance(doc, dict):  # pragma: no cover - the document starts with '{'
            raise TraceFormatError(self.path, f"JSON {type(doc).__name__} is not a trace")
        events = doc.get("traceEvents")
        if events is None:
            keys = ", ".join(str(k)[:40] for k in list(doc)[:5]) or "none"
            raise TraceFormatError(self.path, f"JSON object without traceEvents (keys: {keys}): not a "
                                              "Chrome/Kineto trace")
        if not isinstance(events, list):
            raise TraceFormatError(self.path, f"traceEvents is a {type(events).__name__}, not a list")
        self.top = {k: v for k, v in doc.items() if k != "traceEvents"}
        return events

    # ---- chunks ------------------------------------------------------------------------------------
    def chunks(self) -> Iterator[list[Any]]:
        """Parsed pieces of traceEvents, in file order. Fills `top` and `warnings` as it goes."""
        frame = self._frame()
        if isinstance(frame, list):
            self.bytes_read = len(self.raw)
            self.entries = len(frame)
            for k in range(0, len(frame), 50_000):
                yield frame[k:k + 50_000]
            return
        start, obj_start = frame
        self._array_form = obj_start is None
        if self.typed and THREADS > 1 and len(self.raw) - start > 4 * self.chunk_bytes and scan_enabled():
            self._ahead = Ahead(self._cut, THREADS)
        try:
            end = yield from self._array(start)
        finally:
            if self._ahead is not None:
                self._ahead.close()
                self._ahead = None
        self._all()
        self.array_end = end
        if end is not None:
            self.suffix = bytes(self.raw[end + 1:])
        if obj_start is not None:
            self._read_top(obj_start, start, end)
        self.bytes_read = len(self.raw)
        self.raw = b""  # the bytes are no longer needed: let them go before the columns are built

    def _read_top(self, obj_start: int, arr_start: int, arr_end: int | None) -> None:
        raw = self.raw
        prefix = bytes(raw[obj_start:arr_start - 1]) + b"[]"
        top: Any = None
        if arr_end is not None:
            try:
                top = orjson.loads(prefix + bytes(raw[arr_end + 1:]))
            except orjson.JSONDecodeError:
                self._warn_once("top-level keys after traceEvents are damaged; ignored")
        if not isinstance(top, dict):
            try:
                top = orjson.loads(prefix + b"}")
            except orjson.JSONDecodeError:
                top = None
        if isinstance(top, dict):
            top.pop("traceEvents", None)
            self.top = top
        else:
            self._warn_once("top-level keys are damaged; ignored")

    def _array(self, pos: int) -> Generator[list[Any], None, int | None]:
        """Yield chunks from raw[pos:] (just after '['); return the index of the closing ']' or None."""
        while True:
            self._avail(pos + self.chunk_bytes + (1 << 16))
            raw, n = self.raw, len(self.raw)
            while pos < n and raw[pos] in _WS:
                pos += 1
            if pos >= n:
                self._lose("traceEvents array is not closed: the file is truncated "
                           "(was the job killed while writing?); read the complete events", truncated=True)
                return None
            if raw[pos] == ord("]"):
                return pos
            width = self.chunk_bytes
            while True:
                m = self._sep(pos + width)
                if m is None:
                    events, end, resume = self._last(pos)
                    if events:
                        self.entries += len(events)
                        yield events
                    if resume is None:
                        return end
                    pos = resume
                    break
                fast = self._fast(pos, m.start() + 1, m.end() - 1) if self.typed else None
                if fast is not None:
                    events, bad, short, msg = fast, -1, False, ""
                else:
                    events, bad, short, msg = self._parse(pos, m.start() + 1, "both")
                if events is None:
                    if short:
                        # The cut fell inside a string or a nested value: widen (doubling keeps a hostile
                        # file full of "},{" inside one string from costing quadratic time).
                        width *= 2
                        continue
                    events, pos = self._salvage(pos, bad, msg)
                else:
                    pos = m.end() - 1
                if events:
                    self.entries += len(events)
                    yield events
                break

    def _fast(self, lo: int, hi: int, nxt: int) -> Any:
        """raw[lo:hi] by the compiled scanner, else the msgspec path; None: the orjson path must take it."""
        got = scan_chunk(self.raw, lo, hi, self._ahead, nxt)
        if got is None:
            return decode_chunk(b"[" + self.raw[lo:hi] + b"]")
        return None if got is False else got

    def _cut(self, pos: int) -> tuple[int, int | None] | None | Literal[False]:
        """Where a piece starting at `pos` ends and the next begins, as `_array` cuts (None: the last piece,
        unless `_close` knows where it ends: then (its end, None); False: not known until more is read)."""
        m = self._sep(pos + self.chunk_bytes, wait=False)
        if m is None:
            close = self._close(pos)
            return None if close is None else (close, None)
        return m if m is False else (m.start() + 1, m.end() - 1)

    def _close(self, pos: int) -> int | None:
        """The index of the array's closing ']' when the document is the bare array, read whole, and ends with
        it (a streamed piece is), so that its last piece goes the fast way too; None otherwise."""
        if not (self.typed and self._array_form) or self._fill is not None:
            return None
        end = self._last_byte(len(self.raw))
        return end if end > pos and self.raw[end] == ord("]") else None

    def _last(self, pos: int) -> tuple[list[Any], int | None, int | None]:
        """The final piece: raw[pos:] holds the last events, ']' and the rest of the document.
        Returns (events, index of ']' or None, where to resume after damage or None)."""
        n = self._all()
        close = self._close(pos)
        if close is not None:
            fast = self._fast(pos, close, close)
            if fast is not None:
                return fast, close, None
        self._open_end = None
        events, bad, _, msg = self._parse(pos, n, "open")
        if isinstance(events, list):  # array form (the document ends with the array), or repaired
            return events, (self._open_end - 1 if self._open_end is not None else self._last_byte(n)), None
        if msg.startswith("unexpected content after document"):
            events, _, _, _ = self._parse(pos, bad, "open")
            if isinstance(events, list):
                return events, self._last_byte(bad), None
        good, resume = self._salvage(pos, bad, msg)
        return good, None, (resume if resume < n else None)

    def _last_byte(self, hi: int) -> int:
        """Index of the last non-whitespace byte before `hi` (no copy of the buffer, unlike rstrip)."""
        raw = self.raw
        while hi > 0 and raw[hi - 1] in _WS:
            hi -= 1
        return hi - 1

    def _salvage(self, pos: int, bad: int, why: str) -> tuple[list[Any], int]:
        """Damage at raw index `bad`: the whole events before it, and where to resume."""
        self._all()
        raw, n = self.raw, len(self.raw)
        good: list[Any] = []
        cuts = [m.start() + 1 for m in _SEP.finditer(raw, pos, min(bad + 1, n))]
        last = raw.rfind(b"}", pos, min(bad + 1, n))  # a complete last event followed by ',' or junk
        if last >= pos and (not cuts or last + 1 > cuts[-1]):
            cuts.append(last + 1)
        for cut in reversed(cuts[-_MAX_BACKTRACK:]):
            v, _, _, _ = self._parse(pos, cut, "both")
            if isinstance(v, list):
                good = v
                break
        m = _SEP.search(raw, bad) if bad < n else None
        if m is None:
            if bad >= n - 1:
                self._lose(f"file ends inside an event at byte {n:,} (truncated: was the job killed while "
                           "writing?); read the complete events before it", truncated=True)
            else:
                self._lose(f"damaged JSON at byte {bad:,} ({why}); the rest of the file is unreadable",
                           truncated=True)
            return good, n
        msg = f"damaged JSON at byte {bad:,} ({why}); skipped to byte {m.end() - 1:,}"
        self.warnings.append(msg)
        self.lost.append(msg)
        return good, m.end() - 1
