"""A columnar index of a trace file in the user's cache folder, so the second open reads arrays, not JSON.

`$NEURON_PROF_CACHE_DIR`, else `$XDG_CACHE_HOME/neuron-prof`, else `~/.cache/neuron-prof` holds one
`<hash of the trace's path>.nprof` folder per trace: the Trace's columns as raw files (`neuron_prof.loaders.coldir`),
memory-mapped when read, so a trace bigger than memory opens in its pages; no pickles. Nothing is ever written beside a trace (shared or read-only folders stay as they are),
and indexes older releases wrote there are not read. An index is keyed by the trace file's size and
mtime and by CACHE_VERSION: any change to the file, or to the loader's output, invalidates it. It is
written only when it is smaller than the trace file (else reading it would not pay: a .json.gz or
.pftrace is usually smaller than its columns) and fits the budget; after each write the least recently
used indexes are deleted until the folder holds at most MAX_BYTES (`$NEURON_PROF_CACHE_MAX_BYTES`).
A trace too big to load in memory is streamed straight into its index (`stream_into`), whatever the budget:
the index is then the only copy of its columns. Set NEURON_PROF_CACHE=0 to disable (a streamed trace then
goes to a temporary folder that is removed once mapped).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from neuron_prof import userdirs
from neuron_prof.errors import DiskFullError
from neuron_prof.formats import CHROME_JSON, gzipped, named_format
from neuron_prof.loaders import coldir
from neuron_prof.model import Trace
from neuron_prof.model.reserve import no_space

CACHE_VERSION = 2
MIN_SIZE = 2_000_000
"""Files smaller than this parse fast enough; no index is written for them."""
MAX_BYTES = 2 * 1024**3
"""Default budget of the cache folder (2 GiB): least recently used indexes beyond it are deleted."""
SUFFIX = ".nprof"
_TMP_PREFIX = ".nprof-"
_STALE_TMP_S = 3600
"""A temporary folder this old was left by a process that died mid-write."""


def enabled() -> bool:
    return os.environ.get("NEURON_PROF_CACHE", "1") not in ("0", "false", "no")


def cache_dir() -> Path | None:
    """The folder indexes go to (None when no home folder is known): `neuron_prof.userdirs.cache_dir`."""
    return userdirs.cache_dir()


def max_bytes() -> int:
    try:
        return max(0, int(os.environ.get("NEURON_PROF_CACHE_MAX_BYTES", MAX_BYTES)))
    except ValueError:
        return MAX_BYTES


def index_path(src: Path) -> Path | None:
    """Where the index of `src` lives (whether or not it exists)."""
    d = cache_dir()
    if d is None:
        return None
    digest = hashlib.sha1(str(src.resolve()).encode()).hexdigest()[:16]
    return d / f"{digest}{SUFFIX}"


def _key(src: Path) -> str:
    st = src.stat()
    return f"v{CACHE_VERSION}:{st.st_size}:{st.st_mtime_ns}"


def load_cached(src: Path) -> Trace | None:
    """The cached Trace for `src` when a valid index exists, else None (never raises)."""
    if not enabled():
        return None
    try:
        key = _key(src)
        path = index_path(src)
        if path is None or not path.is_dir():
            return None
        head = coldir.read_head(path)
        if head.get("key") != key:
            return None
        trace = coldir.read_trace(path, head)
    except Exception:  # noqa: BLE001 - a missing or damaged index is ignored, the file is parsed again
        return None
    try:
        os.utime(path)  # recently used: evicted last
    except OSError:
        pass
    return trace


def save_cached(src: Path, trace: Trace) -> Path | None:
    """Write the index for `src`; returns where, or None when none was written (never raises)."""
    if not enabled():
        return None
    try:
        size = src.stat().st_size
        if size < MIN_SIZE:
            return None
        key = _key(src)
        path = index_path(src)
    except OSError:
        return None
    if path is None:
        return None
    need = coldir.nbytes(trace)
    budget = max_bytes()
    if need >= size or need > budget:
        return None
    done = _write(path, lambda folder: coldir.write_trace(folder, trace, key))
    if done is not None:
        evict(path.parent, budget, keep=path)
    return done


def stream_into(src: Path, ingest: Callable[[Path, str], None]) -> Trace:
    """A trace too big for memory: `ingest(folder, key)` writes its columns into a fresh index folder, which
    becomes the index of `src` and is read back memory-mapped. Without a cache folder (or with the cache off)
    the folder is temporary, removed as soon as its files are mapped (they stay readable until unmapped).
    A full disk is a `DiskFullError` naming the folders tried; the temporary folder is tried after a full cache
    folder only when it lies on another file system."""
    key = _key(src)
    path = index_path(src) if enabled() else None
    full: list[str] = []
    if path is not None:
        try:
            done = _write(path, lambda folder: ingest(folder, key), swallow=False)
        except OSError as e:  # only a full disk comes out of _write
            full.append(str(path.parent))
            if _same_disk(path.parent, Path(tempfile.gettempdir())):
                raise DiskFullError(src, full, _plain_json(src)) from e
            done = None
        if done is not None:
            evict(path.parent, max_bytes(), keep=path)
            return coldir.read_trace(path)
    tmp = Path(tempfile.mkdtemp(prefix=_TMP_PREFIX))
    try:
        ingest(tmp, key)
        return coldir.read_trace(tmp)
    except OSError as e:
        if no_space(e):
            raise DiskFullError(src, [*full, str(tmp.parent)], _plain_json(src)) from e
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _plain_json(src: Path) -> bool:
    """Whether `src` is named as a plain (not gzipped) JSON trace."""
    return named_format(src) is CHROME_JSON and not gzipped(src)


def _same_disk(a: Path, b: Path) -> bool:
    """Whether folders `a` and `b` lie on one file system (True when either cannot be asked)."""
    try:
        return a.stat().st_dev == b.stat().st_dev
    except OSError:
        return True


def _write(path: Path, fill: Callable[[Path], None], swallow: bool = True) -> Path | None:
    """A new folder filled by `fill`, then renamed to `path` (replacing an older index); None when it could not
    be written. Errors other than OSError raise unless `swallow`; OSError gives None, but for a full disk
    when not `swallow` (raised: the caller says so). The half-written folder is removed either way."""
    tmp = None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=path.parent, prefix=_TMP_PREFIX, suffix=".tmp"))
        fill(tmp)
        if path.exists():
            old = path.with_name(f"{_TMP_PREFIX}{path.name}.{os.getpid()}.old")
            os.replace(path, old)
            _remove(old)
        os.replace(tmp, path)
        return path
    except Exception as e:  # the index is an optimisation unless the caller needs it
        if tmp is not None:
            _remove(tmp)
        if swallow or (isinstance(e, OSError) and not no_space(e)):
            return None
        raise


def _remove(p: Path) -> None:
    if p.is_dir() and not p.is_symlink():
        shutil.rmtree(p, ignore_errors=True)
    else:
        p.unlink(missing_ok=True)


def evict(folder: Path, budget: int, keep: Path | None = None) -> list[Path]:
    """Delete the least recently used indexes until `folder` holds at most `budget` bytes (and temporary
    folders of writers that died); `keep` is never deleted. Returns what was deleted (never raises)."""
    entries: list[tuple[float, int, Path]] = []
    gone: list[Path] = []
    now = time.time()
    try:
        with os.scandir(folder) as it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if e.name.startswith(_TMP_PREFIX) and now - st.st_mtime > _STALE_TMP_S:
                    gone.append(Path(e.path))
                elif e.name.endswith(SUFFIX) and e.is_dir(follow_symlinks=False):
                    entries.append((st.st_mtime, coldir.folder_bytes(Path(e.path)), Path(e.path)))
                elif e.name.endswith(SUFFIX) and e.is_file(follow_symlinks=False):
                    gone.append(Path(e.path))  # an index of release 1 (one .npz file): never read again
    except OSError:
        return []
    total = sum(size for _, size, _ in entries)
    for _, size, p in sorted(entries, key=lambda t: t[0]):  # oldest use first
        if total <= budget:
            break
        if p != keep:
            gone.append(p)
            total -= size
    deleted = []
    for p in gone:
        try:
            _remove(p)
            deleted.append(p)
        except OSError:
            pass  # another process got there first
    return deleted
