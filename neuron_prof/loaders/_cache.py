"""A columnar index beside a trace file, so the second open is a read of arrays, not a parse.

`<dir>/.<name>.nprof` (or, when that folder is not writable, `$NEURON_PROF_CACHE_DIR` or
`~/.cache/neuron-prof/<hash>.nprof`) holds the Trace's columns as an uncompressed .npz. It is keyed by the
source file's size and mtime and by CACHE_VERSION: any change to the file, or to the loader's output
format, invalidates it. Set NEURON_PROF_CACHE=0 to disable.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from neuron_prof.model import ArgsStore, Process, StringTable, Trace, Track
from neuron_prof.model._tables import CounterTable, FlowTable, InstantTable, SliceTable

CACHE_VERSION = 1
_TABLES = {"slices": SliceTable, "instants": InstantTable, "counters": CounterTable, "flows": FlowTable}
MIN_SIZE = 2_000_000
"""Files smaller than this parse fast enough; no index is written for them."""


def enabled() -> bool:
    return os.environ.get("NEURON_PROF_CACHE", "1") not in ("0", "false", "no")


def _key(src: Path) -> str:
    st = src.stat()
    return f"v{CACHE_VERSION}:{st.st_size}:{st.st_mtime_ns}"


def _candidates(src: Path) -> list[Path]:
    digest = hashlib.sha1(str(src.resolve()).encode()).hexdigest()[:16]
    base = os.environ.get("NEURON_PROF_CACHE_DIR")
    user = Path(base) if base else Path.home() / ".cache" / "neuron-prof"
    out = [] if base else [src.with_name(f".{src.name}.nprof")]
    return out + [user / f"{digest}.nprof"]


def load_cached(src: Path) -> Trace | None:
    """The cached Trace for `src` when a valid index exists, else None (never raises)."""
    if not enabled():
        return None
    try:
        key = _key(src)
    except OSError:
        return None
    for path in _candidates(src):
        try:
            with np.load(path, allow_pickle=False) as z:
                head = orjson.loads(bytes(z["head"]))
                if head.get("key") != key:
                    continue
                return _from_arrays(head, z)
        except Exception:  # noqa: BLE001 - a damaged index is ignored, the file is parsed again
            continue
    return None


def save_cached(src: Path, trace: Trace) -> Path | None:
    """Write the index for `src`; returns where, or None when nothing could be written (never raises)."""
    if not enabled():
        return None
    try:
        if src.stat().st_size < MIN_SIZE:
            return None
        key = _key(src)
    except OSError:
        return None
    arrays = _to_arrays(trace, key)
    for path in _candidates(src):
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".nprof-", suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **arrays)
            os.replace(tmp, path)
            return path
        except OSError:
            try:
                os.unlink(tmp)
            except (OSError, UnboundLocalError):
                pass
            continue
    return None


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
