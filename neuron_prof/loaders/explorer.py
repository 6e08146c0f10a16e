"""A processed Neuron Explorer profile folder (``neuron-explorer view --output-format parquet``) into a Trace.

    trace = load_explorer("profile_dir/")    # a finished Trace, or TraceLoadError / TraceFormatError

Source: shared/design/neuron-explorer-facts.md (schema 7.4.0). Read in this order:

1. ``Warning`` (message, category): ingestion problems, i.e. lost data → ``metadata["load_warnings"]``;
2. ``Metadata.profile_schema_version``: an unknown MAJOR is a TraceFormatError (CLI exit 2), a newer MINOR
   loads; versions, instance type, ``is_simulation`` → ``metadata["neuron_explorer"]``;
3. ``SystemProfileMetadata``: ``first_ts_ns``/``last_ts_ns`` (Unix ns strings) → ``metadata["wall_ns"]``,
   ``hbm_capacity_bytes`` (per NeuronCore) → ``metadata["device_memory_bytes"]``;
4. ``SystemProfileEvents`` (host, runtime and hardware tracks, launch flows), ``ActiveTime``, ``CcOp``,
   HBM counters (see `_explorer_events`, `_explorer_device`);
5. ``Summary`` (MFU, MBU, HFU, engine shares...), ``ExecutionInfo`` and ``Instruction`` aggregates → metadata.

Tables a profile lacks (no device profile: no ActiveTime) are skipped; columns the schema gained later are
never read. Table times are ns on the host clock (the tool aligns device clocks with sync points); they are
Unix ns when they look like it (after 2001), else the trace is marked ``clock="relative"``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from neuron_prof.errors import TraceLoadError
from neuron_prof.loaders._explorer_device import (add_active_time, add_cc_ops, add_hbm_counters,
                                                  execution_totals, instruction_totals)
from neuron_prof.loaders._explorer_events import HostRow, add_system_events
from neuron_prof.loaders._explorer_tables import Tables, check_version, is_explorer_folder
from neuron_prof.model import Meta, Trace, TraceBuilder

__all__ = ["EXPLORER_KEY", "HostRow", "add_explorer", "find_profile", "is_explorer_folder", "load_explorer"]

EXPLORER_KEY = "neuron_explorer"
"""Metadata key holding what the profile says about itself (versions, summary, per-engine totals)."""
SOURCE_FORMAT = "neuron_explorer"
UNIX_NS_MIN = 1_000_000_000_000_000_000
"""Times above this many ns (2001-09-09) are Unix ns."""
_META_FIELDS = ("profile_schema_version", "instance_type", "runtime_version", "compiler_version",
                "driver_version", "neuroncore_idx", "neuron_device_idx", "first_hw_timestamp",
                "last_hw_timestamp", "is_simulation")
_SUMMARY_FIELDS = ("total_time", "mfu_estimated_percent", "mbu_estimated_percent", "hfu_estimated_percent",
                   "dma_active_time_percent", "cc_op_active_time_percent", "hbm_read_bytes", "hbm_write_bytes",
                   "spill_save_bytes", "model_flops")


def load_explorer(path: str | os.PathLike[str]) -> Trace:
    """Load a processed Neuron Explorer profile folder (Parquet tables, split or not), or the runtime output
    folder one or two levels above it (see `find_profile`).

    Raises:
        TraceLoadError: not a folder of Explorer tables; TraceFormatError: an unknown schema MAJOR, a file
        that is not Parquet, a documented column missing or of another type.
    """
    folder = find_profile(Path(path))
    b = TraceBuilder()
    warnings, wall = add_explorer(b, folder)
    md = b.metadata
    md[Meta.SOURCE] = str(folder)
    md[Meta.SOURCE_FORMAT] = SOURCE_FORMAT
    md[Meta.BACKEND] = "neuron"
    md[Meta.CLOCK] = _clock(b, wall)
    if wall is not None:
        md[Meta.WALL] = wall
    if warnings:
        md[Meta.WARNINGS] = warnings
    return b.build()


def add_explorer(b: TraceBuilder, folder: Path, host_row: HostRow | None = None
                 ) -> tuple[list[str], tuple[int, int] | None]:
    """Add a processed profile's tables to `b` (see the module docstring); returns the load warnings and the
    profile's (first, last) Unix ns. `host_row`: `b` already holds the framework's ops (a capture), so
    framework dispatch events are joined to them instead of added (`_explorer_events.add_system_events`).
    ``metadata["neuron_explorer"]`` and ``metadata["device_memory_bytes"]`` are set."""
    tables = Tables(folder)
    warnings = _warnings(tables)
    own: dict[str, Any] = {}
    meta = _one_row(tables, "Metadata", _META_FIELDS)
    if meta is None:
        warnings.append("Neuron Explorer profile has no Metadata table: schema version unknown")
    else:
        warnings += check_version(meta.get("profile_schema_version"), folder)
        own.update({k: v for k, v in meta.items() if v is not None})
    sysmeta = _one_row(tables, "SystemProfileMetadata", ("first_ts_ns", "last_ts_ns", "ntff_version",
                                                         "hbm_capacity_bytes")) or {}
    if sysmeta.get("ntff_version") is not None:
        own["ntff_version"] = sysmeta["ntff_version"]
    cap = sysmeta.get("hbm_capacity_bytes")
    if isinstance(cap, int) and cap > 0:
        b.metadata["device_memory_bytes"] = cap  # the memory_probe key the memory_peak finding reads
    own["events"] = add_system_events(b, tables, warnings, host_row)
    own["active_time_ns"] = add_active_time(b, tables)
    own["collectives"] = add_cc_ops(b, tables)
    own["hbm_peak_bytes"] = add_hbm_counters(b, tables)
    own["summary"] = _summary(tables)
    own["executions"] = execution_totals(tables)
    own["instructions"] = instruction_totals(tables)
    own["tables"] = sorted(set(tables.read))
    b.metadata[EXPLORER_KEY] = {k: v for k, v in own.items() if v not in (None, {}, [])}
    return warnings, _wall(sysmeta)


RAW_CAPTURE = ("*.ntff", "ntrace.pb", "trace_info.pb")
"""Files of the runtime's own capture (neuron-explorer-facts, "Capture"), before neuron-explorer processed it."""


def find_profile(folder: Path) -> Path:
    """The processed profile a folder names: the folder itself, else the one folder below it (up to two levels:
    ``<instance>_pid_<pid>/<timestamp>/``) holding Explorer tables.

    Raises:
        TraceLoadError: not a folder; a raw runtime capture (the message gives the neuron-explorer command);
        several processed profiles below it (it names them); nothing Neuron Explorer wrote.
    """
    if not folder.is_dir():
        raise TraceLoadError(folder, "not a folder")
    if is_explorer_folder(folder):
        return folder
    below = [d for d in sorted(folder.glob("*/")) + sorted(folder.glob("*/*/")) if d.is_dir() and
             is_explorer_folder(d)]
    if len(below) == 1:
        return below[0]
    if below:
        names = ", ".join(str(d.relative_to(folder)) for d in below[:4]) + (", ..." if len(below) > 4 else "")
        raise TraceLoadError(folder, f"holds {len(below)} processed Neuron Explorer profiles ({names}): "
                                     "name one of them")
    raw = [d for d in [folder, *sorted(folder.glob("*/")), *sorted(folder.glob("*/*/"))]
           if d.is_dir() and any(next(d.glob(g), None) is not None for g in RAW_CAPTURE)]
    if raw:
        raise TraceLoadError(folder, f"is a Neuron runtime capture not yet processed: run `neuron-explorer view -d "
                                     f"{raw[0]} --output-format parquet --output-file {raw[0]}/parquet` and load "
                                     f"{raw[0]} again")
    raise TraceLoadError(folder, "is a directory, not a trace file nor a Neuron Explorer profile "
                                 "(no Metadata.parquet, SystemProfileEvents_0.parquet... in it or below it)")


def _warnings(tables: Tables) -> list[str]:
    """``Warning`` rows first (they say data was lost), as "Neuron Explorer [category]: message"."""
    import pyarrow as pa

    t = tables.table("Warning", {"message": pa.string(), "category": pa.string()}, required=("message",))
    if t is None:
        return []
    out = []
    for msg, cat in zip(t.column("message").to_pylist(), t.column("category").to_pylist()):
        out.append(f"Neuron Explorer{f' [{cat}]' if cat else ''}: {msg}")
    return out


def _one_row(tables: Tables, table: str, fields: tuple[str, ...]) -> dict[str, Any] | None:
    """The documented fields of a one-row table, typed as written (None for a missing table)."""
    import pyarrow as pa

    have = tables.columns(table)
    if not tables.has(table):
        return None
    want = [f for f in fields if f in have]
    t = tables.table(table, {f: _schema_type(tables, table, f, pa) for f in want})
    if t is None or not t.num_rows:
        return {}
    return t.slice(0, 1).to_pylist()[0]


def _schema_type(tables: Tables, table: str, field: str, pa: Any) -> Any:
    import pyarrow.parquet as pq

    for f in tables.parts[table]:
        s = pq.read_schema(f)
        if field in s.names:
            return s.field(field).type
    return pa.null()


def _summary(tables: Tables) -> dict[str, Any]:
    """Summary's documented whole-profile metrics, plus every per-engine ``*_active_time_percent``."""
    cols = tables.columns("Summary")
    fields = tuple(f for f in cols if f in _SUMMARY_FIELDS or f.endswith("_active_time_percent"))
    row = _one_row(tables, "Summary", tuple(sorted(fields))) or {}
    return {k: v for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def _wall(sysmeta: dict[str, Any]) -> tuple[int, int] | None:
    try:
        a, z = int(str(sysmeta["first_ts_ns"])), int(str(sysmeta["last_ts_ns"]))
    except (KeyError, TypeError, ValueError):
        return None
    return (a, z) if 0 < a <= z else None


def _clock(b: TraceBuilder, wall: tuple[int, int] | None) -> str:
    ts = np.asarray(b.s_ts or b.c_ts or ([wall[0]] if wall else [0]), dtype=np.int64)
    return "unix" if len(ts) and int(ts.min()) >= UNIX_NS_MIN else "relative"
