"""A JSON trace file's bytes: `read_bytes` (gunzipped when gzip, a cut or damaged gzip stream read up to the
damage with a warning), and `Fill`, a plain file read into memory by a thread while the reader already
scans its front.

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

import threading
import zlib
from pathlib import Path
from typing import Any

from neuron_prof.errors import TraceFormatError, TraceLoadError

MIN_BYTES = 16 << 20
"""Files smaller than this are read at once (a thread does not pay)."""
_STEP = 8 << 20


class Fill:
    """See the module docstring."""

    def __init__(self, path: Path, size: int) -> None:
        try:
            self._f = open(path, "rb")  # noqa: SIM115 - closed by the reading thread
        except FileNotFoundError:
            raise TraceLoadError(path, "no such file") from None
        except PermissionError:
            raise TraceLoadError(path, "permission denied") from None
        except OSError as e:
            raise TraceLoadError(path, f"cannot read: {e.strerror or e}") from None
        self.path = path
        self.raw = bytearray(size)
        self.ready = 0
        self.done = False
        self._error: OSError | None = None
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._read, name="neuron-prof-read", daemon=True)
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

    def need(self, k: int) -> int:
        """Wait until `k` bytes are read (or the file ended); the bytes available."""
        if self.ready >= k:
            return self.ready
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
            raise TraceLoadError(self.path, f"cannot read: {e.strerror or e}")
        if self.ready < len(self.raw):  # the file got shorter while read: keep what it held
            self.raw = self.raw[:self.ready]


def read_bytes(path: Path, warnings: list[str]) -> bytes | bytearray:
    """The file's bytes, gunzipped when it is gzip. A truncated gzip gives what it holds, with a warning."""
    try:
        with open(path, "rb") as f:
            head = f.read(2)
            f.seek(0)
            if head != b"\x1f\x8b":
                return f.read()
            return _gunzip(f, path, warnings)
    except IsADirectoryError:
        raise TraceLoadError(path, "is a directory, not a trace file") from None
    except FileNotFoundError:
        raise TraceLoadError(path, "no such file") from None
    except PermissionError:
        raise TraceLoadError(path, "permission denied") from None
    except OSError as e:
        raise TraceLoadError(path, f"cannot read: {e.strerror or e}") from None


def _gunzip(f: Any, path: Path, warnings: list[str]) -> bytearray:
    out = bytearray()
    d = zlib.decompressobj(wbits=31)
    while True:
        block = f.read(1 << 22)
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
