"""Chrome/Kineto JSON (`.json`, `.json.gz`) into the trace model.

    trace = load_kineto_json("trace.json.gz")      # a finished Trace, or TraceLoadError
    parse_kineto_into(builder, data, source)       # a parsed Kineto dict into a TraceBuilder (capture)

Reads every phase Perfetto reads: X, B/E (paired per thread), i/I/R instants (Kineto `[memory]` too),
C counters (one track per (pid, name, key)), M metadata, v1 flows s/t/f and v2 bind_id flows, async
b/e/n (slices on ASYNC tracks); other phases are counted into `metadata["load_warnings"]`.
Times become Unix ns: `baseTimeNanoseconds` + µs converted exactly; without a base, µs that already
look like Unix time (> 1e15) are used as they are, and anything else is marked `clock="relative"`.
Kineto's top-level keys are kept under `metadata["kineto"]`; the `neuron_prof` key our exporter writes
restores track kinds, probe tracks, metadata and findings, so JSON -> model -> JSON -> model is exact.
Truncated or damaged files load best-effort with warnings (see `_json_read`).
Pieces of X, flow and instant events go through the compiled scanner (`_json_scan`, `_jscan.c`) in threads
when it is built, the rest through msgspec/orjson; a large file is read (gunzipped) by a thread meanwhile
(`_json_fill`). Either way the Trace is the same. Events become tracks and columns in `_json_convert`.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from neuron_prof.errors import TraceFormatError, TraceLoadError
from neuron_prof.formats import CHROME_JSON, GZIP_MAGIC
from neuron_prof.loaders.gc_hold import no_gc
from neuron_prof.loaders.json._convert import Converter, first_warning
from neuron_prof.loaders.json._parallel import HEAD_BYTES, parse_parallel, workers_wanted
from neuron_prof.loaders.json._read import JsonEventReader
from neuron_prof.loaders.json._scan import ingest_path, scan_enabled
from neuron_prof.loaders.json.fill import MIN_BYTES as FILL_MIN
from neuron_prof.loaders.json.fill import Fill, gzip_size, read_bytes
from neuron_prof.loaders.json.restore import restore_own
from neuron_prof.model import ArgsStore, CounterTable, InstantTable, SliceTable, Trace, TraceBuilder
from neuron_prof.model.schema import META_KEY, Meta

__all__ = ["ingest_path", "load_kineto_json", "parse_kineto_into"]

_PARSE_BATCH = 50_000


def load_kineto_json(path: str | os.PathLike[str], *,
                     transform: Callable[[list[Any]], list[Any]] | None = None) -> Trace:
    """Load a Chrome/Kineto JSON trace (.json or .json.gz).

    Args:
        path: the file.
        transform: applied to each chunk of parsed traceEvents entries before they are converted (capture
            rewrites stacks this way); the file is then read in this process.

    Raises:
        TraceLoadError: missing, unreadable or a directory; TraceFormatError: not a trace at all.
    """
    with no_gc():
        return _load(Path(path), transform)


def _load(p: Path, transform: Callable[[list[Any]], list[Any]] | None = None) -> Trace:
    if p.is_dir():
        raise TraceLoadError(p, "is a directory, not a trace file")
    if p.exists() and not p.is_file():
        # a FIFO blocks until a writer comes and /dev/zero never ends: only regular files are read
        raise TraceLoadError(p, "not a regular file (a pipe, socket or device); save the trace to a file first")
    try:
        size = p.stat().st_size
    except OSError:
        size = 0  # read_bytes says what is wrong
    workers = workers_wanted(size) if transform is None else 1
    if workers > 1:
        trace = _load_parallel(p, size, workers, p)
        if trace is not None:
            return trace
    warnings: list[str] = []
    fill = _fill(p, size) if transform is None else None
    raw = read_bytes(p, warnings) if fill is None else fill.raw
    gz_warnings = fill.warnings if fill is not None else []
    n = len(raw)
    if fill is None and n != size and not warnings and transform is None and workers_wanted(n) > 1:
        # A large .json.gz: gunzipped into a temporary file, the workers can read their ranges from it.
        tmp = _spill(raw)
        if tmp is not None:
            del raw
            try:
                trace = _load_parallel(tmp, n, workers_wanted(n), p)
            finally:
                tmp.unlink(missing_ok=True)
            if trace is not None:
                return trace
            raw = read_bytes(p, warnings)
    reader = JsonEventReader(raw, p, typed=transform is None, fill=fill)
    del raw, fill  # the reader lets go of the bytes once parsed
    builder = TraceBuilder()
    conv = Converter(builder, str(p))
    try:
        for chunk in reader.chunks():
            conv.add(chunk if transform is None else transform(chunk))
    except RecursionError:
        raise TraceFormatError(p, "JSON nested too deeply to read") from None
    # every warning of read_bytes is a damaged or cut gzip stream: the events after it are lost
    warnings += gz_warnings
    lost = warnings + reader.lost
    partial = (partial_info(lost, truncated=bool(warnings) or reader.truncated, bytes_read=reader.bytes_read)
               if lost else None)
    return _finish(p, conv, reader.top, warnings + reader.warnings, partial)


def _fill(p: Path, size: int) -> Fill | None:
    """A large file read (gunzipped) by a thread while the scanner starts on its front (None: read it at once)."""
    if not scan_enabled():
        return None
    try:
        with open(p, "rb") as f:
            gz = f.read(2) == GZIP_MAGIC
    except OSError:
        return None  # read_bytes says what is wrong
    if gz:
        isize = gzip_size(p, size)
        return Fill(p, isize, gz=True) if isize is not None and isize >= FILL_MIN else None
    return Fill(p, size) if size >= FILL_MIN else None


def _spill(raw: bytes | bytearray | mmap.mmap) -> Path | None:
    """`raw` in a temporary file (None if it cannot be written: the caller parses in memory instead)."""
    fd, name = tempfile.mkstemp(prefix="neuron-prof-", suffix=CHROME_JSON.suffixes[0])
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        return Path(name)
    except OSError:
        Path(name).unlink(missing_ok=True)
        return None


def _load_parallel(p: Path, size: int, workers: int, source: Path) -> Trace | None:
    """The same Trace as the sequential path, parsed by `workers` processes; None when it does not apply.
    `p` holds the JSON (plain); `source` is the file the user named."""
    try:
        with open(p, "rb") as f:
            head = f.read(HEAD_BYTES)
    except OSError:
        return None
    if head[:2] == GZIP_MAGIC:
        return None  # gzip: one stream, read sequentially
    reader = JsonEventReader(head, p)
    try:
        frame = reader._frame()
    except TraceLoadError:
        return None
    if isinstance(frame, list) or frame[1] is None:
        return None
    start, obj_start = frame
    parts = parse_parallel(p, size, workers, start)
    if parts is None or parts[-1]["suffix"] is None:
        return None
    try:
        top = orjson.loads(head[obj_start:start - 1] + b"[]" + parts[-1]["suffix"])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(top, dict):
        return None
    top.pop("traceEvents", None)
    conv = Converter(TraceBuilder(), str(source))
    for part in parts:
        conv.merge_part(part)
    return _finish(source, conv, top, [])


def partial_info(problems: list[str], *, truncated: bool, bytes_read: int) -> dict[str, Any]:
    """`metadata["partial"]` of a file whose events were not all read (docs/check.md: "Partial traces")."""
    return {"truncated": truncated, "problems": list(problems), "bytes_read": int(bytes_read)}


def _finish(p: Path, conv: Converter, top: dict[str, Any], warnings: list[str],
            partial: dict[str, Any] | None = None) -> Trace:
    builder = conv.b
    if conv.events.entries and not conv.n_events_read():
        raise TraceFormatError(p, f"none of the {conv.events.entries:,} entries of traceEvents is a trace event "
                                  f"({first_warning(conv)}): not a Chrome/Kineto trace")
    if not conv.events.entries and warnings:
        raise TraceFormatError(p, f"no complete event could be read: {warnings[-1]}")
    cols, flows = conv.finish(top, warnings)
    trace = builder.build()
    trace = trace.replace(
        slices=SliceTable(ts_ns=cols.s_ts, dur_ns=cols.s_dur, track=cols.s_track, name=cols.s_name,
                          cat=cols.s_cat, args=cols.s_args),
        instants=InstantTable(ts_ns=cols.i_ts, track=cols.i_track, name=cols.i_name, cat=cols.i_cat,
                              args=cols.i_args),
        counters=CounterTable(ts_ns=cols.c_ts, track=cols.c_track, value=cols.c_value),
        flows=flows,
        args=ArgsStore(cols.args_blob, np.concatenate(([0], np.cumsum(cols.args_lengths))).astype(np.int64)))
    own = top.get(META_KEY)
    if isinstance(own, dict):
        trace = restore_own(trace, own, builder.metadata.get(Meta.WARNINGS))
    if partial is not None:  # after the restore: it describes this read of the file, not an earlier one
        trace = trace.replace(metadata={**trace.metadata, Meta.PARTIAL: partial})
    return trace


def parse_kineto_into(builder: TraceBuilder, data: dict[str, Any], source: str) -> None:
    """Add a parsed Kineto/Chrome JSON document (a dict with traceEvents, or a list of events) to `builder`.

    May be called several times on one builder (one call per profiler cycle); slices, args and flows are
    appended after what the builder holds.
    """
    if isinstance(data, list):
        events, top = data, {}
    elif isinstance(data, dict):
        events = data.get("traceEvents", [])
        top = {k: v for k, v in data.items() if k != "traceEvents"}
    else:
        raise TraceFormatError(source, f"JSON {type(data).__name__} is not a trace")
    if not isinstance(events, list):
        raise TraceFormatError(source, f"traceEvents is a {type(events).__name__}, not a list")
    with no_gc():
        conv = Converter(builder, source)
        for k in range(0, len(events), _PARSE_BATCH):
            conv.add(events[k:k + _PARSE_BATCH])
        cols, flows = conv.finish(top, [])
    b = builder
    b.s_ts.extend(cols.s_ts.tolist())
    b.s_dur.extend(cols.s_dur.tolist())
    b.s_track.extend(cols.s_track.tolist())
    b.s_name.extend(cols.s_name.tolist())
    b.s_cat.extend(cols.s_cat.tolist())
    b.s_args.extend(cols.s_args.tolist())
    b.i_ts.extend(cols.i_ts.tolist())
    b.i_track.extend(cols.i_track.tolist())
    b.i_name.extend(cols.i_name.tolist())
    b.i_cat.extend(cols.i_cat.tolist())
    b.i_args.extend(cols.i_args.tolist())
    b.c_ts.extend(cols.c_ts.tolist())
    b.c_track.extend(cols.c_track.tolist())
    b.c_value.extend(cols.c_value.tolist())
    blob, o = cols.args_blob, np.concatenate(([0], np.cumsum(cols.args_lengths))).tolist()
    add_raw = b.args.add_raw
    for i in range(len(o) - 1):
        add_raw(blob[o[i]:o[i + 1]])
    b.f_src.extend(flows.src.tolist())
    b.f_dst.extend(flows.dst.tolist())
    b.f_id.extend(flows.flow_id.tolist())
    b.f_cat.extend(flows.cat.tolist())
    b.f_name.extend(flows.name.tolist())


