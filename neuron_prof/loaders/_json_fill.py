"""A JSON trace file's bytes: `read_bytes` (gunzipped when gzip, a cut or damaged gzip stream read up to the
damage with a warning), and `Fill`, a file read (or gunzipped: the size its gzip trailer announces is the
buffer's, more is appended at the end) into memory by a thread while the reader already scans its front.

Reading a 344 MB file costs 0.3-1 s of wall time here (the copy out of the page cache); with the compiled
scanner that is a quarter of a first open, spent before the first piece could be scanned. `Fill` reads into
one buffer of the file's size in 8 MB steps (readinto releases the GIL); `JsonEventReader` asks `need(k)`
before it looks at bytes below k. A file that ends early (it changed while read) leaves `raw` shorter, as a
plain read would have.

    fill = Fill(path, size)     # opens the file here: errors are raised here, as read_bytes raises them
    fill.need(k)                # -> bytes available (>= k unless the file ended before)
    fill.raw                    # the buffer (a bytearray); shortened to what was read once done
"""

from __future__ import annotations

import mmap
import threading
import zlib
from pathlib import Path
from typing import Any

from neuron_prof.errors import TraceFormatError, TraceLoadError

MIN_BYTES = 16 << 20
"""Files smaller than this are read at once (a thread does not pay)."""
MAX_GZIP_RATIO = 200
"""A gzip trailer announcing more than this many times the file's size is not trusted (read at once)."""
_STEP = 8 << 20
GZ_BLOCK = 1 << 22
"""Compressed bytes gunzipped at a time (a damaged stream is read up to the last whole block before the damage)."""


def _buffer(size: int) -> mmap.mmap | bytearray:
    """`size` writable bytes: private anonymous memory, which the kernel zeroes page by page as the reading
    thread first writes it (bytearray(size) zeroes all of it first, in the caller's thread: 0.2 s for 344 MB;
    a shared mapping, mmap's default, is shared memory: 0.35 s of page faults where a private one takes 0.26)."""
    if not size:
        return bytearray()
    private = getattr(mmap, "MAP_PRIVATE", None)  # not on Windows
    try:
        return mmap.mmap(-1, size) if private is None else mmap.mmap(-1, size, flags=private)
    except OSError:
        return bytearray(size)


class Fill:
    """See the module docstring."""

    def __init__(self, path: Path, size: int, gz: bool = False) -> None:
        """`size`: the file's size, or for gzip (`gz`) the size its trailer announces (if more comes, it is
        appended at the end; if less, the buffer is cut)."""
        try:
            self._f = open(path, "rb")  # noqa: SIM115 - closed by the reading thread
        except OSError as e:
            raise TraceLoadError.from_os_error(path, e) from None
        self.path = path
        self.raw: bytes | bytearray | mmap.mmap = _buffer(size)
        self.ready = 0
        self.done = False
        self.warnings: list[str] = []
        """A damaged or cut gzip stream, in read_bytes' words."""
        self._extra: list[bytes] = []
        self._total = 0
        self._error: Exception | None = None
        self._finished = False
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._gunzip if gz else self._read, name="neuron-prof-read",
                                        daemon=True)
        self._thread.start()

    def _read(self) -> None:
        view = memoryview(self.raw)
        try:
            with self._f:
                while self.ready < len(self.raw):
                    got = self._f.readinto(view[self.ready:self.ready + _STEP])
                    if not got:
                        break
                    with self._cv:
                        self.ready += got
                        self._cv.notify_all()
        except OSError as e:
            self._error = e
        finally:
            view.release()
            with self._cv:
                self.done = True
                self._cv.notify_all()

    def _put(self, data: bytes) -> None:
        """Gunzipped bytes: into the buffer while it has room, after it otherwise."""
        k = min(len(self.raw) - self._total, len(data)) if not self._extra else 0
        if k > 0:
            self.raw[self._total:self._total + k] = data[:k]  # type: ignore[index]
        if k < len(data):
            self._extra.append(data[k:])
        self._total += len(data)
        if k > 0:
            with self._cv:
                self.ready += k
                self._cv.notify_all()

    def _gunzip(self) -> None:
        """As read_bytes' _gunzip, into the buffer step by step (concatenated members, damage, truncation)."""
        d = zlib.decompressobj(wbits=31)
        try:
            with self._f:
                while True:
                    block = self._f.read(GZ_BLOCK)
                    if not block:
                        break
                    try:
                        self._put(d.decompress(block))
                        while d.eof and d.unused_data:
                            rest = d.unused_data
                            d = zlib.decompressobj(wbits=31)
                            self._put(d.decompress(rest))
                    except zlib.error as e:
                        if not self._total:
                            self._error = TraceFormatError(self.path, f"not a valid gzip file ({e})")
                        else:
                            self.warnings.append(f"gzip data damaged after {self._total:,} bytes ({e}); "
                                                 "read what came before")
                        return
                if not d.eof:
                    self._put(d.flush())
                    if not self._total:
                        self._error = TraceFormatError(self.path, "gzip file is truncated before any data")
                    else:
                        self.warnings.append(f"gzip stream truncated after {self._total:,} bytes (was the job "
                                             "killed while writing?); read what it holds")
        except OSError as e:
            self._error = e
        finally:
            with self._cv:
                self.done = True
                self._cv.notify_all()

    def need(self, k: int) -> int:
        """Wait until `k` bytes are read (or the file ended); the bytes available."""
        if self.ready < k and not self.done:
            with self._cv:
                while self.ready < k and not self.done:
                    self._cv.wait()
        if self.done:
            self._finish()
        return self.ready

    def _finish(self) -> None:
        self._thread.join()
        if self._error is not None:
            e, self._error = self._error, None
            if isinstance(e, TraceFormatError):
                raise e
            raise TraceLoadError(self.path, f"cannot read: {getattr(e, 'strerror', None) or e}")
        if self._finished:
            return
        self._finished = True
        if self._extra:  # gzip: more than its trailer said (concatenated members, or beyond 4 GB)
            self.raw = bytes(self.raw) + b"".join(self._extra)
            self._extra = []
        elif self.ready < len(self.raw):  # the file got shorter while read, or gunzipped to less
            self.raw = self.raw[:self.ready]
        self.ready = len(self.raw)


def gzip_size(path: Path, size: int) -> int | None:
    """The gunzipped size a gzip file's trailer announces (modulo 4 GB), None when implausible."""
    try:
        with open(path, "rb") as f:
            f.seek(max(size - 4, 0))
            isize = int.from_bytes(f.read(4), "little")
    except OSError:
        return None
    return isize if size < isize <= MAX_GZIP_RATIO * size else None


def read_bytes(path: Path, warnings: list[str]) -> bytes | bytearray:
    """The file's bytes, gunzipped when it is gzip. A truncated gzip gives what it holds, with a warning."""
    try:
        with open(path, "rb") as f:
            head = f.read(2)
            f.seek(0)
            if head != b"\x1f\x8b":
                return f.read()
            return _gunzip(f, path, warnings)
    except OSError as e:
        raise TraceLoadError.from_os_error(path, e) from None


def _gunzip(f: Any, path: Path, warnings: list[str]) -> bytearray:
    out = bytearray()
    d = zlib.decompressobj(wbits=31)
    while True:
        block = f.read(GZ_BLOCK)
        if not block:
            break
        try:
            out += d.decompress(block)
            # Concatenated gzip members (gzip allows them) follow one another.
            while d.eof and d.unused_data:
                rest = d.unused_data
                d = zlib.decompressobj(wbits=31)
                out += d.decompress(rest)
        except zlib.error as e:
            if not out:
                raise TraceFormatError(path, f"not a valid gzip file ({e})") from None
            warnings.append(f"gzip data damaged after {len(out):,} bytes ({e}); read what came before")
            return out
    if not d.eof:
        out += d.flush()
        if not out:
            raise TraceFormatError(path, "gzip file is truncated before any data")
        warnings.append(f"gzip stream truncated after {len(out):,} bytes (was the job killed while writing?); "
                        "read what it holds")
    return out
