"""A columnar index of a trace file in the user's cache folder, so the second open reads arrays, not JSON.

`$NEURON_PROF_CACHE_DIR`, else `$XDG_CACHE_HOME/neuron-prof`, else `~/.cache/neuron-prof` holds one
`<hash of the trace's path>.nprof` per trace: the Trace's columns as an uncompressed .npz, read with
pickles refused. Nothing is ever written beside a trace (shared or read-only folders stay as they are),
and indexes older releases wrote there are not read. An index is keyed by the trace file's size and
mtime and by CACHE_VERSION: any change to the file, or to the loader's output, invalidates it. It is
written only when it is smaller than the trace file (else reading it would not pay: a .json.gz or
.pftrace is usually smaller than its columns) and fits the budget; after each write the least recently
used indexes are deleted until the folder holds at most MAX_BYTES (`$NEURON_PROF_CACHE_MAX_BYTES`).
Set NEURON_PROF_CACHE=0 to disable.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from neuron_prof import userdirs
from neuron_prof.model import ArgsStore, Process, StringTable, Trace, Track
from neuron_prof.model import CounterTable, FlowTable, InstantTable, SliceTable

CACHE_VERSION = 1
_TABLES = {"slices": SliceTable, "instants": InstantTable, "counters": CounterTable, "flows": FlowTable}
MIN_SIZE = 2_000_000
"""Files smaller than this parse fast enough; no index is written for them."""
MAX_BYTES = 2 * 1024**3
"""Default budget of the cache folder (2 GiB): least recently used indexes beyond it are deleted."""
SUFFIX = ".nprof"
_TMP_PREFIX = ".nprof-"
_STALE_TMP_S = 3600
"""A temporary file this old was left by a process that died mid-write."""
_HEADER_BYTES = 512
"""Bound on the .npz bytes around each array (.npy header ~128, zip entry and directory ~200)."""


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
        if path is None:
            return None
        with np.load(path, allow_pickle=False) as z:
            head = orjson.loads(bytes(z["head"]))
            if head.get("key") != key:
                return None
            trace = _from_arrays(head, z)
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
    arrays = _to_arrays(trace, key)
    need = sum(a.nbytes + _HEADER_BYTES for a in arrays.values())
    budget = max_bytes()
    if need >= size or need > budget:
        return None
    tmp = None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_TMP_PREFIX, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return None
    evict(path.parent, budget, keep=path)
    return path


def evict(folder: Path, budget: int, keep: Path | None = None) -> list[Path]:
    """Delete the least recently used indexes until `folder` holds at most `budget` bytes (and temporary
    files of writers that died); `keep` is never deleted. Returns what was deleted (never raises)."""
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
                elif e.name.endswith(SUFFIX) and e.is_file(follow_symlinks=False):
                    entries.append((st.st_mtime, st.st_size, Path(e.path)))
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
            p.unlink()
            deleted.append(p)
        except OSError:
            pass  # another process got there first
    return deleted


def _to_arrays(trace: Trace, key: str) -> dict[str, np.ndarray]:
    head = {
        "key": key,
        "processes": [vars(p) for p in trace.processes],
        "tracks": [vars(t) for t in trace.tracks],
        "metadata": trace.metadata,
        "findings": list(trace.findings),
    }
    strings = [s.encode("utf-8", "surrogatepass") for s in trace.strings.as_list()]
    out: dict[str, np.ndarray] = {
        "head": np.frombuffer(orjson.dumps(head, default=str, option=orjson.OPT_NON_STR_KEYS), dtype=np.uint8),
        "str_blob": np.frombuffer(b"".join(strings), dtype=np.uint8),
        "str_len": np.array([len(s) for s in strings], dtype=np.int64),
        "args_blob": np.frombuffer(trace.args.buffers[0], dtype=np.uint8),
        "args_off": trace.args.buffers[1],
    }
    for tname, cls in _TABLES.items():
        table = getattr(trace, tname)
        for col in cls.DTYPES:
            out[f"{tname}.{col}"] = getattr(table, col)
    return out


def _from_arrays(head: dict[str, Any], z: Any) -> Trace:
    blob = bytes(z["str_blob"])
    ends = np.cumsum(z["str_len"])
    starts = ends - z["str_len"]
    strings = StringTable(blob[a:b].decode("utf-8", "surrogatepass") for a, b in zip(starts[1:], ends[1:]))
    tables = {t: cls(**{c: z[f"{t}.{c}"] for c in cls.DTYPES}) for t, cls in _TABLES.items()}
    return Trace(strings=strings, processes=tuple(Process(**p) for p in head["processes"]),
                 tracks=tuple(Track(**t) for t in head["tracks"]),
                 args=ArgsStore(bytes(z["args_blob"]), np.array(z["args_off"])),
                 metadata=head["metadata"], findings=tuple(head["findings"]), **tables)
