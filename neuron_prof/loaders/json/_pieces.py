"""A Chrome JSON file cut into pieces of traceEvents between two events, each parsed as `_parallel.parse_range`
parses a range, for the streamed load (`stream`): neither the file nor its events are ever held whole.

    for part, prefix in parsed_pieces(path, warnings):   # first (None, the text before traceEvents' '['), then (part, None)

A plain file's piece is read straight into the buffer its parse takes ('[' + events + ']', no other copy); a
`.json.gz` is gunzipped on the fly. A piece is cut at the first separator after `piece_bytes() - CUT_BACK`;
a cut that lands inside a string (the piece parses with warnings) is moved to a later separator.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Callable, Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

from neuron_prof.errors import TraceFormatError
from neuron_prof.formats import GZIP_MAGIC
from neuron_prof.loaders.json._parallel import _SEP, HEAD_BYTES, parse_range
from neuron_prof.loaders.json._read import JsonEventReader
from neuron_prof.loaders.json.fill import gunzip_steps

PIECE_BYTES = 64 << 20
"""JSON parsed at a time (its parse needs a few times this); NEURON_PROF_STREAM_PIECE_MB changes it."""
CUT_BACK = 1 << 20
"""A piece is cut at the first separator after this many bytes before its size (a quarter of it at most):
what is read past the cut is read again (plain) or copied (gzip) into the next piece."""
SPARE = 2
"""Parsed pieces' buffers kept for the next pieces (one is parsed while the next is read: two in memory)."""
_OPEN, _CLOSE = ord("["), ord("]")


def piece_bytes() -> int:
    try:
        return max(1 << 20, int(float(os.environ["NEURON_PROF_STREAM_PIECE_MB"]) * (1 << 20)))
    except (KeyError, ValueError):
        return PIECE_BYTES


class _Source:
    """The file's JSON text (gunzipped for gzip), read at increasing offsets: `read(lo, n)`."""

    def __init__(self, f: BinaryIO, path: Path, warnings: list[str]) -> None:
        self.f = f
        gz = f.read(2) == GZIP_MAGIC
        f.seek(0)
        self.blocks = _ahead(gunzip_steps(f, path, warnings)) if gz else None
        self.window = bytearray()
        """gzip: the text from `wlo` on, gunzipped but not yet cut into pieces."""
        self.wlo = 0
        self.spare: list[bytearray] = []
        """Pieces parsed and given back (`give_back`): the next pieces are read into them."""
        self.dropped = 0
        """Where the text `done` handed back to the kernel ends."""

    def close(self) -> None:
        """Stop the gunzipping thread (before the file closes)."""
        if isinstance(self.blocks, Generator):
            self.blocks.close()

    def ahead(self, lo: int, n: int) -> Callable[[], tuple[bytearray, bool]] | None:
        """`read(lo, n)` started in a thread while the caller parses the piece before (a plain file only: a
        gzip stream is read in order); call the result for it. None: read it when needed."""
        if self.blocks is not None:
            return None
        pool = ThreadPoolExecutor(1, thread_name_prefix="neuron-prof-read")
        try:
            got = pool.submit(self.read, lo, n)
        finally:
            pool.shutdown(wait=False)
        return got.result

    def done(self, upto: int) -> None:
        """The file's text before `upto` is parsed and never read again: a plain file's pages go out of the page
        cache (``POSIX_FADV_DONTNEED``). Read once, a trace bigger than memory would otherwise push the column
        cache just written out of it, and the command that follows would read that back from the disk (20 GB:
        4.8 of the cache's 10.2 GB left in memory after the load, 12.2 GB of the JSON; `summary` 110 -> 130 s)."""
        if self.blocks is not None or upto <= self.dropped or not hasattr(os, "posix_fadvise"):
            return
        with contextlib.suppress(OSError):  # a file system that does not take the advice: nothing lost
            os.posix_fadvise(self.f.fileno(), self.dropped, upto - self.dropped, os.POSIX_FADV_DONTNEED)
        self.dropped = upto

    def give_back(self, piece: bytearray) -> None:
        """`piece` is parsed and nothing reads it any more: a later piece is read into it (`buffer`)."""
        if len(self.spare) < SPARE:
            self.spare.append(piece)

    def buffer(self, size: int) -> bytearray:
        """A buffer of `size` bytes for a piece, its content undefined: one given back when there is one (memory
        this process already has: a new one's pages are zeroed by the kernel, then by bytearray, at every piece),
        else a new one. One that something still views (a memoryview, a numpy array over it) cannot change size
        and is let go."""
        while self.spare:
            buf = self.spare.pop()
            try:
                if len(buf) > size:
                    del buf[size:]
                elif len(buf) < size:
                    buf += bytes(size - len(buf))
            except BufferError:  # still exported: not ours to write into
                continue
            return buf
        return bytearray(size)

    def read(self, lo: int, n: int) -> tuple[bytearray, bool]:
        """('[' + the `n` bytes of text at offset `lo` (fewer at the end), whether the text ends there). `lo`
        never goes back. A plain file is read straight into the buffer (the parse may repair it in place: a
        piece read again is read from the file); a gzip stream's text is copied out of the window."""
        if self.blocks is None:
            buf = self.buffer(1 + n)
            buf[0] = _OPEN
            got = 0
            with memoryview(buf) as view:
                while got < n:
                    r = os.preadv(self.f.fileno(), [view[1 + got:]], lo + got)  # no file position: see `ahead`
                    if not r:
                        break
                    got += r
            if got < n:
                del buf[1 + got:]
            return buf, got < n
        del self.window[:lo - self.wlo]
        self.wlo = lo
        while len(self.window) < n:
            blk = next(self.blocks, None)
            if blk is None:
                break
            self.window += blk
        k = min(n, len(self.window))
        buf = self.buffer(1 + k)
        buf[0] = _OPEN
        with memoryview(self.window) as view:
            buf[1:] = view[:k]
        return buf, k < n


def _ahead(blocks: Iterator[bytes], depth: int = 4) -> Iterator[bytes]:
    """`blocks` made by a thread (gunzipped: zlib gives the GIL back), at most `depth` of them ahead."""
    q: queue.Queue[tuple[bytes | None, BaseException | None]] = queue.Queue(depth)
    stop = threading.Event()

    def put(item: tuple[bytes | None, BaseException | None]) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False  # the reader is gone

    def run() -> None:
        try:
            for b in blocks:
                if not put((b, None)):
                    return
            put((None, None))
        except (TraceFormatError, OSError, ValueError, MemoryError) as e:  # raised in the reader
            put((None, e))

    t = threading.Thread(target=run, name="neuron-prof-gunzip", daemon=True)
    t.start()
    try:
        while True:
            b, err = q.get()
            if err is not None:
                raise err
            if b is None:
                return
            yield b
    finally:
        stop.set()
        t.join()


def parsed_pieces(path: Path, warnings: list[str]) -> Iterator[tuple[dict[str, Any] | None, bytes | None]]:
    """(None, the top-level object's text before traceEvents' '[', None for the array form) first, then each
    piece parsed: (part, None)."""
    with open(path, "rb") as f:
        src = _Source(f, path, warnings)
        try:
            head = src.read(0, HEAD_BYTES)[0][1:]
            frame = JsonEventReader(bytes(head), path)._frame_in(len(head) - 1)
            if not isinstance(frame, tuple):
                raise TraceFormatError(path, "traceEvents does not open within the first 8 MB: too big to read in "
                                             "pieces")
            start, obj_start = frame
            yield None, (bytes(head[obj_start:start - 1]) if obj_start is not None else None)
            del head
            yield from _pieces(src, start, path)
        finally:
            src.close()


def _pieces(src: _Source, lo: int, path: Path) -> Iterator[tuple[dict[str, Any], None]]:
    """The pieces of the text from offset `lo` (just after traceEvents' '['), parsed."""
    size = piece_bytes()
    back = min(CUT_BACK, size // 4)
    look = 0
    nxt: tuple[int, Callable[[], tuple[bytearray, bool]] | None] | None = None
    while True:
        got = nxt[1] if nxt is not None and nxt[0] == lo and not look else None
        nxt = None
        piece, end = got() if got is not None else src.read(lo, size + look)
        if end:
            upto = lo + len(piece) - 1  # piece[0] is the '[' put in front
            yield parse_range(piece, path), None  # the last piece: the array's end and the document's rest
            src.done(upto)
            return
        m = _SEP.search(piece, 1 + size - back + look)
        if m is None:
            look += size // 4
            continue
        del piece[m.start() + 1:]
        piece.append(_CLOSE)
        after = lo + m.end() - 2  # piece[i] is the text at lo + i - 1
        nxt = (after, src.ahead(after, size))  # the next piece is read while this one is parsed (2 in memory)
        part = parse_range(piece, path)
        src.give_back(piece)
        del piece
        if part["warnings"] and look < 16 * size:
            look = m.end() - 1 - (1 + size - back)  # a cut inside a string: cut at a later separator
            continue
        src.done(after)
        lo = after
        look = 0
        yield part, None
