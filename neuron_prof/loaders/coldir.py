"""A Trace as a folder of raw columns, read back memory-mapped: the layout of the on-disk column cache.

    write_trace(folder, trace, key)      # an in-memory Trace into `folder`
    w = ColumnWriter(folder)             # or column by column, piece by piece (streamed ingest; with
                                         # background=True a thread writes while the caller goes on)
    w.append("slices.ts_ns", array); ...; w.close(head)
    trace = read_trace(folder)           # columns are read-only np.memmap, args a mmap: pages come on demand

The folder holds `head` (JSON: the cache key, processes, tracks, metadata, findings, and each column's dtype
and length), one `<table>.<column>` file of raw native-endian values per column, `args.bin` (the ArgsStore's
blob) and `strings.bin` (the string table, UTF-8 back to back, lengths in the `str_len` column). Nothing of a
column is held in memory while it is written or read, so a trace bigger than memory fits.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import threading
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson

from neuron_prof.model import (
    ArgsStore,
    CounterTable,
    FlowTable,
    InstantTable,
    Process,
    SliceTable,
    StringTable,
    Trace,
    Track,
)

TABLES: dict[str, type[SliceTable | InstantTable | CounterTable | FlowTable]] = {
    "slices": SliceTable, "instants": InstantTable, "counters": CounterTable, "flows": FlowTable}
HEAD = "head"
ARGS = "args.bin"
STRINGS = "strings.bin"
_OPTS = orjson.OPT_NON_STR_KEYS
_NUMERIC = "biuf"
"""Kinds of dtype a column may have: nothing else is ever mapped (no object arrays, so no pickles)."""


class ColumnWriter:
    """Appends columns to files in `folder`; `close(head)` writes head (with the columns' shapes) last."""

    def __init__(self, folder: Path, background: bool = False) -> None:
        self.folder = folder
        self._files: dict[str, BinaryIO] = {}
        self._dtypes: dict[str, str] = {}
        self._rows: dict[str, int] = {}
        self._bg = _Background() if background else None
        """With `background`, the writes go to the files in a thread while the caller goes on (see _Background)."""

    def append(self, name: str, values: np.ndarray | bytes, dtype: Any = None) -> None:
        """Append `values` (an array, or bytes for args.bin / strings.bin) to column `name`."""
        f = self._files.get(name)
        if f is None:
            f = self._files[name] = open(self.folder / name, "wb")  # closed in close()
            self._rows[name] = 0
        if isinstance(values, (bytes, bytearray, memoryview)):
            self._write(f, values)
            self._rows[name] += len(values)
            self._dtypes.setdefault(name, "u1")
            return
        a = np.ascontiguousarray(values, dtype=dtype)
        self._dtypes.setdefault(name, a.dtype.str)
        if a.dtype.str != self._dtypes[name]:
            a = a.astype(self._dtypes[name])
        self._write(f, a.data.cast("B"))
        self._rows[name] += len(a)

    def _write(self, f: BinaryIO, data: bytes | bytearray | memoryview) -> None:
        if self._bg is None:
            f.write(data)
        else:
            self._bg.put(f, data)

    def sync(self) -> None:
        """Wait for the writes handed to the thread (raising what failed there)."""
        if self._bg is not None:
            self._bg.wait()

    def declare(self, name: str, dtype: Any) -> None:
        """Make column `name` exist (empty) with `dtype` even when nothing is appended."""
        if name not in self._files:
            self._files[name] = open(self.folder / name, "wb")  # closed in close()
            self._rows[name] = 0
            self._dtypes[name] = np.dtype(dtype).str

    def names(self) -> list[str]:
        return list(self._files)

    def rows(self, name: str) -> int:
        return self._rows.get(name, 0)

    def flush(self, name: str) -> None:
        self.sync()
        if name in self._files:
            self._files[name].flush()

    def mapped(self, name: str) -> np.ndarray:
        """Column `name` as written so far, memory-mapped (flushed first: rows still in the file's buffer, all of a
        small trace's, would make the map longer than the file)."""
        self.flush(name)
        n, dtype = self._rows[name], self._dtypes[name]
        return np.memmap(self.folder / name, dtype=dtype, mode="r", shape=(n,)) if n else np.zeros(0, dtype)

    def drop(self, name: str) -> None:
        """Close and delete column `name` (a temporary one)."""
        self.sync()
        self._files.pop(name).close()
        del self._rows[name], self._dtypes[name]
        (self.folder / name).unlink()

    def close(self, head: dict[str, Any]) -> None:
        self.stop()
        for f in self._files.values():
            f.close()
        head = {**head, "columns": {n: [self._dtypes[n], self._rows[n]] for n in self._files}}
        (self.folder / HEAD).write_bytes(orjson.dumps(head, default=str, option=_OPTS))

    @contextlib.contextmanager
    def closed_on_failure(self) -> Iterator[None]:
        """Around a streamed load's writes: when they fail, the thread ends and every file is closed, what they
        still buffer let go (a full disk would refuse it again); left open, the files of a folder removed after
        the failure would hold their disk space. The folder is the caller's to remove."""
        try:
            yield
        except BaseException:
            self.stop(quiet=True)
            for f in self._files.values():
                with contextlib.suppress(OSError, ValueError):
                    f.close()  # the file is closed even when writing its buffer fails
            self._files.clear()
            raise

    def stop(self, quiet: bool = False) -> None:
        """End the writing thread, if any, once its writes are done (raising what failed there unless `quiet`:
        after a failure of the caller's own)."""
        bg, self._bg = self._bg, None
        if bg is not None:
            bg.stop(quiet)


class _Background:
    """Writes (file, bytes) in one thread, in the order given, holding at most MAX_PENDING bytes not yet
    written: the caller parses the next piece meanwhile (a write gives the GIL back). What fails there (a full
    disk) is raised in the caller at its next call."""

    MAX_PENDING = 64 << 20

    def __init__(self) -> None:
        self._todo: deque[tuple[BinaryIO, Any] | None] = deque()
        self._pending = 0
        self._error: BaseException | None = None
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="neuron-prof-columns", daemon=True)
        self._thread.start()

    def put(self, f: BinaryIO, data: bytes | bytearray | memoryview) -> None:
        n = len(data) if not isinstance(data, memoryview) else data.nbytes
        with self._cv:
            while self._pending > self.MAX_PENDING and self._error is None:
                self._cv.wait()
            self._raise()
            self._todo.append((f, data))
            self._pending += n
            self._cv.notify_all()

    def wait(self) -> None:
        with self._cv:
            while (self._todo or self._pending) and self._error is None:
                self._cv.wait()
            self._raise()

    def stop(self, quiet: bool) -> None:
        with self._cv:
            self._todo.append(None)
            self._cv.notify_all()
        self._thread.join()
        if not quiet:
            self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._todo:
                    self._cv.wait()
                job = self._todo.popleft()
            if job is None:
                return
            f, data = job
            n = len(data) if not isinstance(data, memoryview) else data.nbytes
            try:
                if self._error is None:
                    f.write(data)
            except (OSError, ValueError, MemoryError) as e:  # raised in the caller
                self._error = e
            with self._cv:
                self._pending -= n
                self._cv.notify_all()


def trace_head(trace: Trace, key: str) -> dict[str, Any]:
    """What head holds besides the columns."""
    return {"key": key, "processes": [vars(p) for p in trace.processes], "tracks": [vars(t) for t in trace.tracks],
            "metadata": trace.metadata, "findings": list(trace.findings)}


def write_strings(w: ColumnWriter, strings: list[str]) -> None:
    enc = [s.encode("utf-8", "surrogatepass") for s in strings]
    w.append(STRINGS, b"".join(enc))
    w.append("str_len", np.array([len(s) for s in enc], dtype=np.int64))


def write_trace(folder: Path, trace: Trace, key: str) -> None:
    """`trace` into `folder` (which exists and is empty)."""
    w = ColumnWriter(folder)
    write_strings(w, trace.strings.as_list())
    blob, off = trace.args.buffers
    w.append(ARGS, blob)
    w.append("args_off", off, np.int64)
    for tname, cls in TABLES.items():
        table = getattr(trace, tname)
        for col, dt in cls.DTYPES.items():
            w.append(f"{tname}.{col}", getattr(table, col), dt)
    w.close(trace_head(trace, key))


def read_head(folder: Path) -> dict[str, Any]:
    return orjson.loads((folder / HEAD).read_bytes())  # type: ignore[no-any-return]


def column(folder: Path, head: dict[str, Any], name: str) -> np.ndarray:
    """Column `name`, memory-mapped read-only (an empty array when it has no rows)."""
    dtype, n = head["columns"][name]
    if np.dtype(dtype).kind not in _NUMERIC:
        raise ValueError(f"column {name}: dtype {dtype} is not numeric")  # an object array would be a pickle
    if n == 0:
        return np.zeros(0, dtype=dtype)
    return np.memmap(folder / name, dtype=dtype, mode="r", shape=(n,))


def _blob(path: Path) -> bytes | mmap.mmap:
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size == 0:
            return b""
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)


def read_trace(folder: Path, head: dict[str, Any] | None = None) -> Trace:
    """The Trace in `folder`: columns memory-mapped, the string table (small: one entry per distinct name) read."""
    head = read_head(folder) if head is None else head
    lens = np.asarray(column(folder, head, "str_len"))
    blob = (folder / STRINGS).read_bytes()
    ends = np.cumsum(lens)
    starts = ends - lens
    strings = StringTable(blob[a:b].decode("utf-8", "surrogatepass")
                          for a, b in zip(starts[1:].tolist(), ends[1:].tolist()))
    tables: dict[str, Any] = {t: cls(**{c: column(folder, head, f"{t}.{c}") for c in cls.DTYPES})
                              for t, cls in TABLES.items()}
    return Trace(strings=strings, processes=tuple(Process(**p) for p in head["processes"]),
                 tracks=tuple(Track(**t) for t in head["tracks"]),
                 args=ArgsStore(_blob(folder / ARGS), column(folder, head, "args_off")),  # type: ignore[arg-type]
                 metadata=head["metadata"], findings=tuple(head["findings"]), **tables)


def nbytes(trace: Trace) -> int:
    """Bytes `write_trace` writes for `trace` (about)."""
    cols = sum(len(getattr(trace, t)) * sum(np.dtype(d).itemsize for d in cls.DTYPES.values())
               for t, cls in TABLES.items())
    return cols + trace.args.nbytes + 16 * len(trace.strings)


def folder_bytes(folder: Path) -> int:
    """Bytes the files of `folder` hold (0 when it is gone)."""
    total = 0
    try:
        with os.scandir(folder) as it:
            for e in it:
                try:
                    total += e.stat(follow_symlinks=False).st_size
                except OSError:
                    pass
    except OSError:
        return 0
    return total
