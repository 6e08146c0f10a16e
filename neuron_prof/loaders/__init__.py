"""Loaders: trace files into the model. `load(path)` picks the reader from the file's content.

Readers (one per format of `neuron_prof.formats`, which names them): Chrome/Kineto JSON (plain or
gzipped, any torch.profiler trace: CUDA, ROCm, MTIA, CPU), neuron-prof's own Perfetto trace, and a
processed Neuron Explorer profile folder (Parquet tables), with its capture's torch.profiler trace.json when the runtime output folder holds one (one trace: host and device),
Neuron Explorer's Perfetto output (system_profile.pftrace and device_profile_model_<id>.pftrace: one trace),
and Neuron Explorer's legacy JSON export (system_profile.json: partial and no longer maintained from Neuron 2.34,
said in the load warnings).
Every reader returns a finished Trace or raises TraceLoadError. A Chrome JSON or .pftrace trace too big to load in
memory (`neuron_prof.loaders.json.stream`, `neuron_prof.loaders.pftrace.stream`) is read in pieces into the column
cache and opened memory-mapped.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path

from neuron_prof.errors import TraceLoadError
from neuron_prof.formats import (
    CHROME_JSON,
    EXPLORER,
    EXPLORER_PFTRACE,
    GZIP_MAGIC,
    PFTRACE,
    TraceFormat,
    detect,
    sniff,
    suffix_list,
)
from neuron_prof.model import Trace

__all__ = ["json_ingest_path", "load", "reader_for"]

_HEAD = 64
"""Bytes read to tell a file's format (`neuron_prof.formats.sniff`)."""


def json_ingest_path() -> str:
    """Which path reads Chrome/Kineto JSON events in this process, in words: the compiled scanner, or the
    Python path (msgspec + orjson) and why (the extension was not built, or NEURON_PROF_JSON_SCANNER=0)."""
    from neuron_prof.loaders.json.reader import ingest_path

    return ingest_path()


def load(path: str | os.PathLike[str]) -> Trace:
    """Load a trace file (Chrome JSON, plain or gzipped, or Perfetto protobuf), a Neuron Explorer profile
    folder or a runtime output folder (trace.json + processed tables) into a Trace.

    Raises:
        TraceLoadError: the file is missing, unreadable, or not a trace (the message says which).
    """
    p = Path(path)
    if p.is_dir():
        return reader_for(EXPLORER)(p)  # says what it expected when the folder holds no Explorer tables
    if p.exists() and not p.is_file():
        # a FIFO blocks until a writer comes and /dev/zero never ends: only regular files are read
        raise TraceLoadError(p, "not a regular file (a pipe, socket or device); save the trace to a file first")
    try:
        with open(p, "rb") as f:
            head = f.read(_HEAD)
    except OSError as e:
        raise TraceLoadError.from_os_error(p, e) from None
    if not head:
        raise TraceLoadError(p, "empty file")
    fmt = detect(head, p)
    if fmt is None and _is_text(head):  # a script, a log, a CSV: neither format's reader can say more
        raise TraceLoadError(p, f"not a trace: text that is neither JSON nor a Perfetto protobuf "
                                f"(traces are {suffix_list()})")
    fmt = fmt or PFTRACE  # no format said: the Perfetto reader says what the file is not
    if fmt is EXPLORER_PFTRACE:  # several files make one trace: not cached under one of their names
        return reader_for(fmt)(p)
    from neuron_prof.loaders import _cache

    cached = _cache.load_cached(p)
    if cached is not None:
        return cached
    if sniff(head) is CHROME_JSON and head[:2] != GZIP_MAGIC:
        from neuron_prof.loaders.explorer.legacy_json import is_explorer_json, load_explorer_json

        with open(p, "rb") as f:
            if is_explorer_json(p, f.read(1 << 16)):
                return load_explorer_json(p)
    if fmt is CHROME_JSON:
        from neuron_prof.loaders.json import stream

        if stream.stream_wanted(p):  # bigger than memory allows: read in pieces into memory-mapped columns
            return _cache.stream_into(p, lambda folder, key: stream.ingest(p, folder, key))
        stream.check_room(p)  # told to load it in memory under a limit it cannot fit: one line, before the parse
    if fmt is PFTRACE:
        from neuron_prof.loaders.pftrace import stream as pf_stream

        if pf_stream.stream_wanted(p):
            return _cache.stream_into(p, lambda folder, key: pf_stream.ingest(p, folder, key))
        pf_stream.check_room(p)
    trace = reader_for(fmt)(p)
    _cache.save_cached(p, trace)
    return trace


def reader_for(fmt: TraceFormat) -> Callable[[Path], Trace]:
    """The loader function of format `fmt` (`neuron_prof.formats`), imported on first use."""
    if fmt.reader is None:
        raise TraceLoadError(fmt.title, "neuron-prof does not read this format")
    module, _, name = fmt.reader.partition(":")
    fn: Callable[[Path], Trace] = getattr(importlib.import_module(module), name)
    return fn


def _is_text(head: bytes) -> bool:
    """Whether a file's first bytes read as text (UTF-8, no NUL, no control bytes but whitespace): a Perfetto
    trace's packets hold varints and NULs from their first bytes."""
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:  # the head may end inside a character
        if e.start < len(head) - 3:
            return False
        text = head[:e.start].decode("utf-8")
    return all(c.isprintable() or c in "\t\n\r\f\v" for c in text)
