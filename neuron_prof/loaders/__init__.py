"""Loaders: trace files into the model. `load(path)` picks the reader from the file's content.

Readers: Chrome/Kineto JSON (`.json`, `.json.gz`, any torch.profiler trace: CUDA, ROCm, MTIA, CPU),
neuron-prof's own `.pftrace`, and a processed Neuron Explorer profile folder (Parquet tables), with its
capture's torch.profiler trace.json when the runtime output folder holds one (one trace: host and device),
and Neuron Explorer's legacy JSON export (system_profile.json: partial, said in the load warnings).
Every reader returns a finished Trace or raises TraceLoadError.
"""

from __future__ import annotations

import os
from pathlib import Path

from neuron_prof.errors import TraceLoadError
from neuron_prof.model import Trace

__all__ = ["json_ingest_path", "load"]


def json_ingest_path() -> str:
    """Which path reads Chrome/Kineto JSON events in this process, in words: the compiled scanner, or the
    Python path (msgspec + orjson) and why (the extension was not built, or NEURON_PROF_JSON_SCANNER=0)."""
    from neuron_prof.loaders.json.reader import ingest_path

    return ingest_path()


def load(path: str | os.PathLike[str]) -> Trace:
    """Load a trace file (.json, .json.gz, .pftrace), a Neuron Explorer profile folder or a runtime output
    folder (trace.json + processed tables) into a Trace.

    Raises:
        TraceLoadError: the file is missing, unreadable, or not a trace (the message says which).
    """
    p = Path(path)
    if p.is_dir():
        from neuron_prof.loaders.explorer.legacy_json import LEGACY_FILE, load_explorer_json

        if (p / LEGACY_FILE).is_file() and next(p.glob("*.parquet"), None) is None:
            return load_explorer_json(p)
        from neuron_prof.loaders.explorer.capture import load_folder

        return load_folder(p)  # says what it expected when the folder holds no Explorer tables
    if p.exists() and not p.is_file():
        # a FIFO blocks until a writer comes and /dev/zero never ends: only regular files are read
        raise TraceLoadError(p, "not a regular file (a pipe, socket or device); save the trace to a file first")
    try:
        with open(p, "rb") as f:
            head = f.read(64)
    except OSError as e:
        raise TraceLoadError.from_os_error(p, e) from None
    if not head:
        raise TraceLoadError(p, "empty file")
    from neuron_prof.loaders import _cache

    cached = _cache.load_cached(p)
    if cached is not None:
        return cached
    text = _looks_like_json(head)
    if head[:2] != b"\x1f\x8b" and text:
        from neuron_prof.loaders.explorer.legacy_json import is_explorer_json, load_explorer_json

        with open(p, "rb") as f:
            if is_explorer_json(p, f.read(1 << 16)):
                return load_explorer_json(p)
    if head[:2] == b"\x1f\x8b" or text or p.name.lower().endswith((".json", ".json.gz")):
        from neuron_prof.loaders.json.reader import load_kineto_json

        trace = load_kineto_json(p)
    else:
        from neuron_prof.loaders.pftrace.reader import load_pftrace

        trace = load_pftrace(p)
    _cache.save_cached(p, trace)
    return trace


def _looks_like_json(head: bytes) -> bool:
    """Whether a file's first bytes are JSON text (content decides, whatever the name). A Perfetto trace starts
    with its first packet's tag, 0x0a (a newline to ``bytes.lstrip``), then the packet's length: a packet of 123
    or 91 bytes makes that ``{`` or ``[``; what follows is then a field's tag, never the start of a JSON value."""
    s = head.lstrip()
    if s[:1] not in (b"{", b"["):
        return False
    rest = s[1:].lstrip()
    return not rest or rest[:1] in b'"{[]}-0123456789tfn'
