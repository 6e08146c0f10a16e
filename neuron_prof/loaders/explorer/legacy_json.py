"""Neuron Explorer's legacy JSON export (``neuron-explorer view --output-format json``:
``system_profile.json``).

    trace = load_explorer_json("system_profile.json")   # or the folder holding it

Sources: shared/design/neuron-explorer-facts.md ("Processing": json is legacy and partial; parquet is the
complete one) and AWS's "Get started with Neuron Explorer" (aws-neuron-sdk tools/neuron-explorer/
get-started.rst, "Option C: Export to JSON"): the file holds event objects keyed by their type
(``Neuron_Runtime_API_Event``, ``Framework_Event``, ...), each with ``name``, ``timestamp`` [Unix ns],
``duration`` [ns], ``group`` (e.g. ``nrt-nc-000``, ``framework-80375131``), ``instance_id`` and optionally
``id`` and ``type``; plus ``mem_usage`` (sampled host memory) and ``cpu_util`` (CPU utilisation per core),
whose fields are not documented. Neuron 2.33 is the last release that supports it, and from Neuron 2.34 it is
no longer maintained (the 2.34 announcement "Neuron Explorer no longer maintains the JSON output format": Parquet
is the programmatic output; ``summary-json`` is not affected): it is still read, and every load says so.

Read: every event object, whether the type key maps to one event or a list, or the file is a list of
``{type: event}`` objects; a slice per event on a track per (instance, group); numeric fields of ``mem_usage``
and ``cpu_util`` samples that have a ``timestamp`` as counters. Not in this format, and said in the load
warnings: device engine busy time, collectives, HBM counters, host-to-device links, the schema version, and
``device_profile_model_<id>.json`` (its layout is not documented).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from neuron_prof.errors import TraceFormatError, TraceLoadError
from neuron_prof.loaders.explorer.reader import UNIX_NS_MIN
from neuron_prof.loaders.json.fill import read_bytes
from neuron_prof.model import Meta, ProcessKind, Trace, TraceBuilder, TrackKind

__all__ = ["LEGACY_FILE", "RETIRED", "is_explorer_json", "load_explorer_json"]

LEGACY_FILE = "system_profile.json"
SOURCE_FORMAT = "neuron_explorer_json"
SAMPLE_KEYS = ("mem_usage", "cpu_util")
RETIRED = ("Neuron Explorer's full-profile JSON output (--output-format json) is no longer maintained from Neuron "
           "2.34 (Parquet is the programmatic output; summary-json remains): read as it is")
LACKS = ("Neuron Explorer legacy JSON (--output-format json) is partial: it has no device engine busy time, "
         "collectives, HBM counters, host-to-device links or schema version; process the capture with "
         "`neuron-explorer view -d <dir> --output-format parquet` for those")
_EVENT_KEY = re.compile(rb'"[A-Za-z][A-Za-z0-9_]*_Event"\s*:\s*[\[{]')


def is_explorer_json(path: Path, head: bytes) -> bool:
    """A legacy export: named system_profile.json, or a JSON file whose first bytes show an ``*_Event`` object
    and no Kineto ``traceEvents``."""
    return path.name == LEGACY_FILE or (b'"traceEvents"' not in head and _EVENT_KEY.search(head) is not None)


def load_explorer_json(path: str | os.PathLike[str]) -> Trace:
    """Load ``system_profile.json`` (or the folder holding it) as a Trace of host/runtime tracks.

    Raises:
        TraceLoadError: no such file; TraceFormatError: not JSON, or no event objects in it.
    """
    p = Path(path)
    if p.is_dir():
        p = p / LEGACY_FILE
    if not p.is_file():
        raise TraceLoadError(p, "no such file")
    warnings: list[str] = []
    try:
        doc = orjson.loads(read_bytes(p, warnings))
    except orjson.JSONDecodeError as e:
        raise TraceFormatError(p, f"not JSON ({e})") from None
    b = TraceBuilder()
    n = _add_events(b, doc)
    if not n:
        raise TraceFormatError(p, "no Neuron Explorer event objects (Framework_Event, "
                                  "Neuron_Runtime_API_Event...) in this JSON")
    _add_samples(b, doc, warnings)
    warnings += [RETIRED, LACKS]
    models = sorted(f.name for f in p.parent.glob("device_profile_model_*.json"))
    if models:
        more = ", ..." if len(models) > 3 else ""
        warnings.append(f"{', '.join(models[:3])}{more} not read: the legacy device profile JSON's layout is "
                        "not documented")
    ts = np.asarray(b.s_ts, dtype=np.int64)
    end = ts + np.asarray(b.s_dur, dtype=np.int64)
    md = b.metadata
    md.update({Meta.SOURCE: str(p), Meta.SOURCE_FORMAT: SOURCE_FORMAT, Meta.BACKEND: "neuron",
               Meta.CLOCK: "unix" if int(ts.min()) >= UNIX_NS_MIN else "relative",
               Meta.WALL: [int(ts.min()), int(end.max())], Meta.WARNINGS: warnings})
    return b.build()


def _events(doc: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """(event type, event) for each event object, whatever nesting the export used."""
    items: Any = doc.items() if isinstance(doc, Mapping) else ()
    if isinstance(doc, list):
        items = ((None, x) for x in doc)
    for key, val in items:
        if key in SAMPLE_KEYS:
            continue
        if key is None:  # a list of {type: event}
            if isinstance(val, Mapping):
                yield from _events(val)
            continue
        for e in val if isinstance(val, list) else [val]:
            if isinstance(e, Mapping) and "timestamp" in e and "name" in e:
                yield str(key), e


def _add_events(b: TraceBuilder, doc: Any) -> int:
    n = 0
    cats: dict[str, int] = {}
    for kind, e in _events(doc):
        ts, dur = _int(e.get("timestamp")), _int(e.get("duration"))
        if ts is None:
            continue
        inst = str(e.get("instance_id") or "neuron")
        pid = f"{inst} (Neuron Explorer JSON)"
        p = b.process(pid, name=pid, kind=ProcessKind.HOST)
        group = str(e.get("group") or kind)
        tr = b.track(p, group, TrackKind.OTHER)
        cat = cats.get(kind)
        if cat is None:
            cat = cats[kind] = b.strings.intern(kind)
        args = {k: e[k] for k in ("id", "type") if k in e}
        b.add_slice_ids(tr, ts, max(dur or 0, 0), b.strings.intern(str(e["name"])), cat,
                        b.args.add(args) if args else -1)
        n += 1
    return n


def _add_samples(b: TraceBuilder, doc: Any, warnings: list[str]) -> None:
    """``mem_usage`` / ``cpu_util``: each numeric field of samples with a ``timestamp`` as a counter."""
    if not isinstance(doc, Mapping):
        return
    for key in SAMPLE_KEYS:
        rows = doc.get(key)
        if rows is None:
            continue
        rows = rows if isinstance(rows, list) else [rows]
        used = 0
        host = "host (Neuron Explorer JSON)"
        p = b.process(host, name=host, kind=ProcessKind.HOST)
        for r in rows:
            ts = _int(r.get("timestamp")) if isinstance(r, Mapping) else None
            if ts is None:
                continue
            for k, v in r.items():
                if k != "timestamp" and isinstance(v, (int, float)) and not isinstance(v, bool):
                    b.add_counter(b.track(p, f"{key} {k}", TrackKind.COUNTER), ts, float(v))
                    used += 1
        if not used and rows:
            warnings.append(f"Neuron Explorer JSON: {key} has no samples with a timestamp: not read")


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and np.isfinite(v):
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v)
    return None
