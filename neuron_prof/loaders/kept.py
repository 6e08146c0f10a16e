"""Documents computed from a trace, kept beside its column cache so a second open need not compute them again.

    doc = kept.read_json(path, kept.OVERVIEW)          # None: none kept, or a stale one
    kept.write_json(path, kept.OVERVIEW, report.to_dict())

A document lives in the trace's index folder (`neuron_prof.loaders._cache.index_path`) as `kept.<name>`, and is
only written where that index exists (a trace without one, or with the cache off, keeps nothing). It is keyed
by the index's own key (the trace file's size and mtime, `CACHE_VERSION`) and by `code_version()` (this
neuron-prof's version and its installed files), so a changed trace file or a changed neuron-prof never reads a
stale one; an index written again (the file changed) replaces the folder and its documents with it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson

from neuron_prof.loaders import _cache, coldir
from neuron_prof.version import __version__

OVERVIEW = "overview"
"""The analysis' overview (totals and findings, `neuron_prof.analysis.overview`) and the per-step breakdown,
as `Report.to_dict` (no lines): the TUI's first screen."""
PREFIX = "kept."
"""Documents are `<index folder>/kept.<name>`."""
_OPTS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def report_name(warmup_steps: int | None) -> str:
    """The name of the whole `summary` report (`analysis.report`) computed with `warmup_steps`."""
    return "report" if warmup_steps is None else f"report-w{warmup_steps}"


@functools.cache
def code_version() -> str:
    """This neuron-prof: its version and a digest of its installed code files' sizes and mtimes (an editable
    install's edits change it too). Read once per process."""
    h = hashlib.sha1(__version__.encode())
    root = Path(__file__).resolve().parents[1]  # the neuron_prof package
    for folder, dirs, files in sorted(os.walk(root)):
        dirs.sort()
        for name in sorted(files):
            if name.endswith((".py", ".so")):
                st = os.stat(os.path.join(folder, name))
                h.update(f"{folder}/{name}:{st.st_size}:{st.st_mtime_ns};".encode())
    return f"{__version__}:{h.hexdigest()[:16]}"


def _where(src: Path, name: str) -> tuple[Path, bytes] | None:
    """(the document's file, its key line) when `src` has a valid index now, else None (never raises)."""
    if not _cache.enabled():
        return None
    try:
        key = _cache._key(src)
        folder = _cache.index_path(src)
        if folder is None or not folder.is_dir() or coldir.read_head(folder).get("key") != key:
            return None
    except Exception:  # noqa: BLE001 - no index, a damaged one: nothing kept
        return None
    return folder / f"{PREFIX}{name}", f"{key}:{code_version()}\n".encode()


def read_json(src: str | os.PathLike[str], name: str) -> dict[str, Any] | None:
    """Document `name` kept for trace file `src`, or None when there is none for this file and this code."""
    at = _where(Path(src), name)
    if at is None:
        return None
    path, key = at
    try:
        data = path.read_bytes()
        if not data.startswith(key):
            return None
        doc = orjson.loads(data[len(key):])
    except Exception:  # noqa: BLE001 - missing or damaged: computed again
        return None
    return doc if isinstance(doc, dict) else None


def write_json(src: str | os.PathLike[str], name: str, doc: dict[str, Any]) -> bool:
    """Keep `doc` as document `name` of trace file `src` (only where its index exists); whether it was written.
    Never raises: keeping is an optimisation."""
    at = _where(Path(src), name)
    if at is None:
        return False
    path, key = at
    tmp = None
    try:
        data = key + orjson.dumps(doc, option=_OPTS)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)  # whole or not at all: a reader never sees half a document
        return True
    except Exception:  # noqa: BLE001 - a full disk, a folder evicted meanwhile, a value JSON cannot hold
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        return False
