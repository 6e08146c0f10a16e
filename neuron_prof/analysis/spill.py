"""Arrays the analyses share for a whole run, moved out of the process's memory into mapped files.

A trace opened from the column cache may be bigger than memory. What the analyses compute once and share
(`Context.memo`: the host nesting, the op table, the backward table...) grows with its rows: kept in memory,
tens of bytes per host slice for the whole run. `spill` writes each big array of such a result to an unlinked
file next to the cache's columns and maps it back read-only: the values are the same, but its pages come on
demand and go back to the kernel with `Spill.drop_pages` (after each analysis), as the columns' do.
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import mmap
import platform
import tempfile
import weakref
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from neuron_prof.model import Trace
from neuron_prof.model.reserve import reserve

SPILL_ROWS = 1 << 20
"""Slices a cached trace has at least for its shared arrays to be spilled (a small trace keeps them in memory)."""
SPILL_BYTES = 1 << 20
"""Bytes an array has at least to be spilled (smaller ones cost a file and a map for nothing)."""


def _cache_folder(trace: Trace) -> Path | None:
    """The folder of `trace`'s memory-mapped columns (the column cache), None for columns in memory."""
    col = trace.slices.ts_ns
    name = getattr(col, "filename", None)
    return Path(name).parent if isinstance(col, np.memmap) and name else None


class Spill:
    """The mapped files of one context's shared arrays (none for a trace in memory or a small one)."""

    def __init__(self, trace: Trace) -> None:
        folder = _cache_folder(trace)
        self.folder = folder if folder is not None and len(trace.slices) >= SPILL_ROWS else None
        self._maps: weakref.WeakSet[mmap.mmap] = weakref.WeakSet()
        """The live maps: a temporary one (`empty`) unmaps, and its unlinked file goes, with its last array."""

    def __call__(self, value: Any) -> Any:
        """`value` with its big arrays (also inside tuples, lists, dicts, dataclasses and plain objects' fields)
        replaced by read-only mapped copies; `value` itself when nothing is spilled. Objects are changed in place:
        call it on a result just built, that nothing else holds yet."""
        if self.folder is None:
            return value
        return self._walk(value, 0)

    def _walk(self, v: Any, depth: int) -> Any:
        if isinstance(v, np.ndarray):
            return self._array(v)
        if depth > 3 or isinstance(v, (str, bytes, int, float, Trace)) or v is None:
            return v
        if isinstance(v, tuple) and not hasattr(v, "_fields"):
            out = tuple(self._walk(x, depth + 1) for x in v)
            return out if any(a is not b for a, b in zip(out, v, strict=True)) else v
        if isinstance(v, list):
            v[:] = [self._walk(x, depth + 1) for x in v]
        elif isinstance(v, dict):
            for k in list(v):
                v[k] = self._walk(v[k], depth + 1)
        elif dataclasses.is_dataclass(v) and not isinstance(v, type):
            for f in dataclasses.fields(v):
                self._set(v, f.name, depth)
        elif hasattr(v, "__dict__") and type(v).__module__.startswith("neuron_prof.analysis"):
            for name in list(vars(v)):
                self._set(v, name, depth)
        return v

    def _set(self, obj: Any, name: str, depth: int) -> None:
        old = getattr(obj, name, None)
        if isinstance(old, (np.ndarray, tuple, list, dict)):
            new = self._walk(old, depth + 1)
            if new is not old:
                object.__setattr__(obj, name, new)  # a frozen dataclass just built: its field, same values

    def _array(self, a: np.ndarray) -> np.ndarray:
        if _mapped(a) and a.flags.writeable:  # written in place (`empty`): shared read-only like the others
            a = a.view()
            a.flags.writeable = False
            return a
        if not a.nbytes or a.nbytes < SPILL_BYTES or a.dtype.kind not in "biuf" or a.ndim != 1 or _mapped(a):
            return a
        assert self.folder is not None
        try:
            with tempfile.TemporaryFile(dir=self.folder, prefix="spill-") as f:  # unlinked: gone with the map
                np.ascontiguousarray(a).tofile(f)
                f.flush()
                m = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError:  # a read-only cache folder, a full disk: the array stays in memory
            return a
        self._maps.add(m)
        return np.frombuffer(m, dtype=a.dtype, count=len(a))

    def empty(self, n: int, dtype: DTypeLike) -> np.ndarray:
        """A writable array of `n` items, uninitialised (zeros when mapped): for a result written a window at a
        time, in a mapped file from the start when this context spills and it is big (`SPILL_BYTES`), so it is
        never held whole in memory; `__call__` leaves it where it is."""
        dt = np.dtype(dtype)
        nbytes = n * dt.itemsize
        if self.folder is None or nbytes < SPILL_BYTES:
            return np.empty(n, dtype=dt)
        try:
            with tempfile.TemporaryFile(dir=self.folder, prefix="spill-") as f:  # unlinked: gone with the map
                reserve(f.fileno(), nbytes)  # a full disk says so here, not as a SIGBUS at a later write
                m = mmap.mmap(f.fileno(), nbytes)  # shared: written pages go to the file, not the process
        except OSError:  # a read-only cache folder, a full disk: in memory
            return np.empty(n, dtype=dt)
        self._maps.add(m)
        return np.frombuffer(m, dtype=dt, count=n)

    def drop_pages(self) -> None:
        """Hand the spilled arrays' resident pages back to the kernel (they come back from the file on the next
        read), and the C heap's free memory (`trim_heap`)."""
        for m in list(self._maps):
            m.madvise(mmap.MADV_DONTNEED)
        if self.folder is not None:
            trim_heap()


def _mapped(a: np.ndarray) -> bool:
    """Whether `a` already lies in a mapped file (a cache column or a view of one)."""
    b: Any = a
    while isinstance(b, np.ndarray):
        if isinstance(b, np.memmap):
            return True
        b = b.base
    return isinstance(b.obj if isinstance(b, memoryview) else b, mmap.mmap)


def trim_heap() -> None:
    """Hand the free pages inside glibc's heap back to the kernel (``malloc_trim(0)``; nothing elsewhere than
    glibc). A window's temporary arrays come from the heap and are reused by the next window (glibc maps blocks
    of up to 32 MB from the heap once it has freed one that big), so they are zeroed once, not at each window;
    between analyses the free ones go back, even under a live object at the heap's top: RSS stays what the
    live arrays need. Mapping each block of 128 kB or more on its own did the same for RSS, but every window's
    temporaries were fresh pages for the kernel to zero: a third of the analyses' CPU time at 3 GB."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)


@functools.cache
def _glibc() -> ctypes.CDLL | None:
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    try:
        lib = ctypes.CDLL(None)
        lib.malloc_trim.argtypes = [ctypes.c_size_t]
        return lib
    except (OSError, AttributeError):
        return None
