"""A JSON trace file's bytes: `read_bytes` (gunzipped when gzip, a cut or damaged gzip stream read up to the
damage with a warning), and `Fill`, a file read (or gunzipped: the size its gzip trailer announces is the
buffer's, more is appended at the end) into memory by a thread while the reader already scans its front.

Reading a 344 MB file costs 0.3-1 s of wall time here (the copy out of the page cache); with the compiled
scanner that is a quarter of a first open, spent before the first piece could be scanned. `Fill` reads into
one buffer of the file's size in 8 MB steps (readinto releases the GIL); `JsonEventReader` asks `need(k)`
before it looks at bytes below k. A file that ends early (it changed while read) leaves `raw` shorter, as a
plain read would have. Both gunzip through `gunzip_steps`, with isal's inflate when installed (zlib's otherwise).

    fill = Fill(path, size)     # opens the file here: errors are raised here, as read_bytes raises them
    fill.need(k)                # -> bytes available (>= k unless the file ended before)
    fill.raw                    # the buffer (a bytearray); shortened to what was read once done
"""

from __future__ import annotations

import mmap
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import BinaryIO

from neuron_prof.errors import TraceFormatError, TraceLoadError
from neuron_prof.formats import GZIP_MAGIC

INFLATE: ModuleType
try:  # Intel ISA-L's inflate (package isal): 344 MB of JSON gunzipped in 0.35 s of CPU where zlib takes 0.8-1.1
    from isal import isal_zlib as INFLATE
except ImportError:
    INFLATE = zlib
"""The module whose decompressobj gunzips (zlib's interface): isal's when installed, else zlib."""

MIN_BYTES = 16 << 20
"""Files smaller than this are read at once (a thread does not pay)."""
MAX_GZIP_RATIO = 200
"""A gzip trailer announcing more than this many times the file's size is not trusted (read at once)."""
_STEP = 8 << 20
GZ_BLOCK = 1 << 22
"""Compressed bytes read at a time."""
GZ_STEP = 4 << 20
"""Gunzipped bytes made at a time (a damaged stream is read up to the last whole step before the damage); bounded,
so the scanner starts early and the steps' memory is reused rather than fresh pages every time."""


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
            self._f = open(path, "rb")  # closed by the reading thread
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
        """gunzip_steps into the buffer."""
        try:
            with self._f:
                for data in gunzip_steps(self._f, self.path, self.warnings):
                    self._put(data)
        except (OSError, TraceFormatError) as e:
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
            if head != GZIP_MAGIC:
                return f.read()
            return _gunzip(f, path, warnings)
    except OSError as e:
        raise TraceLoadError.from_os_error(path, e) from None


def _gunzip(f: BinaryIO, path: Path, warnings: list[str]) -> bytearray:
    out = bytearray()
    for data in gunzip_steps(f, path, warnings):
        out += data
    return out


def gunzip_steps(f: BinaryIO, path: Path, warnings: list[str]) -> Iterator[bytes]:
    """The gunzipped bytes of the gzip file `f`, GZ_STEP at most at a time, concatenated members one after the
    other. Damage or a cut stream ends them with a warning in `warnings` (what came before is kept);
    TraceFormatError when not a byte could be read."""
    errors = (zlib.error, getattr(INFLATE, "error", zlib.error))
    d = INFLATE.decompressobj(wbits=31)
    total = 0
    while True:
        block = f.read(GZ_BLOCK)
        if not block:
            break
        while block:
            try:
                data = d.decompress(block, GZ_STEP)
            except errors as e:
                if not total:
                    raise TraceFormatError(path, f"not a valid gzip file ({e})") from None
                warnings.append(f"gzip data damaged after {total:,} bytes ({e}); read what came before")
                return
            if d.eof:  # a member ends; what follows it (zlib also leaves it in unconsumed_tail) is the next one
                block = d.unused_data
                if block:
                    d = INFLATE.decompressobj(wbits=31)
            else:
                block = d.unconsumed_tail
            if data:
                total += len(data)
                yield data
    if not d.eof:
        data = d.flush()
        total += len(data)
        if data:
            yield data
        if not total:
            raise TraceFormatError(path, "gzip file is truncated before any data")
        warnings.append(f"gzip stream truncated after {total:,} bytes (was the job killed while writing?); "
                        "read what it holds")
