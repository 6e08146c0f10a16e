"""A processed Neuron Explorer profile folder (``neuron-explorer view --output-format parquet``) into a Trace.

    trace = load_explorer("profile_dir/")    # a finished Trace, or TraceLoadError / TraceFormatError

Source: shared/design/neuron-explorer-facts.md and neuron-explorer-schema-7.4.0.txt. The folder says what it
is: ``SchemaFields`` (its tables and fields) and ``Metadata.profile_schema_version``; without SchemaFields the
documented 7.4.0 layout is assumed (`_explorer_schema`). No version is refused: each view reads only the fields
it needs (`_explorer_tables.Tables.need`); a view whose fields are gone is left out with a warning naming
``Table.field``, and only a profile with nothing left to show is one TraceFormatError (CLI exit 2). Read:

1. ``Warning`` (message, category): ingestion problems → ``metadata["load_warnings"]``;
2. ``Metadata`` (versions, instance type, device-clock ``first_hw_timestamp``) and ``SystemProfileMetadata``
   (``first_ts_ns``/``last_ts_ns``: Unix ns → ``metadata["wall_ns"]``; ``hbm_capacity_bytes`` per NeuronCore →
   ``metadata["device_memory_bytes"]``);
3. the system profile, host clock: ``SystemProfileEvents`` (`_explorer_events`), ``SystemProfileHbmUsage``,
   ``CpuUsage``, ``HostMemUsage`` (`_explorer_counters`);
4. the device profile, device clock, placed on the host clock through its executions (`_explorer_clock`,
   `_explorer_device`): ``ActiveTime``, ``CcOp``, ``HbmUsage``/``DmaUsage`` bandwidth, ``Error``;
5. ``Summary``, ``OpcodeSummary``, ``ExecutionInfo`` (`_explorer_summary`) and ``Instruction`` with
   ``FrameworkInstruction`` and the ``StackFrame`` tables (`_explorer_instructions`) →
   ``metadata["neuron_explorer"]``; a summary-json file in the folder (`summary_json`) too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from neuron_prof.errors import TraceFormatError, TraceLoadError
from neuron_prof.loaders.explorer._clock import UNIX_NS_MIN
from neuron_prof.loaders.explorer._counters import add_hbm_bytes, add_host_usage
from neuron_prof.loaders.explorer._events import HostRow, add_system_events
from neuron_prof.loaders.explorer._profiles import add_device_profiles, device_folders
from neuron_prof.loaders.explorer._schema import ASSUMED, version_warnings
from neuron_prof.loaders.explorer._summary import one_row
from neuron_prof.loaders.explorer._tables import RowFilter, Tables, is_explorer_folder
from neuron_prof.loaders.explorer.summary_json import summaries_in
from neuron_prof.model import Meta, Trace, TraceBuilder

__all__ = ["EXPLORER_KEY", "HostRow", "LACKS_KEY", "RowFilter", "UNIX_NS_MIN", "add_explorer", "find_profile",
           "is_explorer_folder", "lacks", "load_explorer"]

EXPLORER_KEY = "neuron_explorer"
"""Metadata key holding what the profile says about itself (schema, versions, summary, per-engine totals)."""
SOURCE_FORMAT = "neuron_explorer"
LACKS_KEY = "lacks"
"""``metadata["neuron_explorer"]["lacks"]``: the parts of a profile it has no tables (or files) for, "system
profile" and/or "device profile": Explorer writes one alone with ``--ignore-device-profile`` /
``--ignore-system-profile`` (how-to-profile-workload.rst, "Skip system or device profiles"), or none was captured.
The summary says so instead of showing the missing part as zero."""
_META_FIELDS = ("profile_schema_version", "instance_type", "runtime_version", "compiler_version",
                "driver_version", "explorer_version", "neuroncore_idx", "neuron_device_idx", "first_hw_timestamp",
                "last_hw_timestamp", "first_ts", "is_simulation", "num_physical_cores", "vnc_enabled")


def load_explorer(path: str | os.PathLike[str]) -> Trace:
    """Load a processed Neuron Explorer profile folder (Parquet tables, split or not), or the runtime output
    folder one or two levels above it (see `find_profile`).

    Raises:
        TraceLoadError: not a folder of Explorer tables; TraceFormatError: a file that is not Parquet, or a
        profile with nothing usable left (the message names the missing fields).
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


def add_explorer(b: TraceBuilder, folder: Path, host_row: HostRow | None = None, rows: RowFilter | None = None,
                 link: Callable[[list[tuple[int, int, int]]], Any] | None = None
                 ) -> tuple[list[str], tuple[int, int] | None]:
    """Add a processed profile's tables to `b` (see the module docstring); returns the load warnings and the
    profile's (first, last) Unix ns. `host_row`: `b` already holds the framework's ops (a capture), so
    framework events are joined to them instead of added (`_explorer_events.add_system_events`). `rows`: keep
    only one process's rows of run-wide tables (``{"instance_id": ..., "process_id": ...}``). `link`: called,
    once the system events are in, with (slice row, flow id, start ns) of each runtime call no framework event
    of the profile shares a flow id with (a capture links them through its framework mapping before the
    device time per host op is summed).
    ``metadata["neuron_explorer"]`` and ``metadata["device_memory_bytes"]`` are set.

    Raises:
        TraceFormatError: nothing in the folder could be shown (the message names what is missing); beside
        host ops already in `b` (a capture's trace.json) that is a warning instead: the host trace stands.
    """
    tables = Tables(folder, rows)
    warnings = _warnings(tables)
    before = (b.n_slices, len(b.c_ts), len(b.i_ts))
    meta = one_row(tables, "Metadata", _META_FIELDS)
    version = (meta or {}).get("profile_schema_version")
    own: dict[str, Any] = {"schema": {"version": str(version) if version else f"{ASSUMED} (assumed)",
                                      "declared_by": tables.schema.source}}
    if meta is None:
        how = "its SchemaFields" if tables.schema.source == "SchemaFields" else f"the {ASSUMED} layout"
        warnings.append(f"Neuron Explorer profile has no Metadata table: schema version unknown, read by {how}")
    else:
        warnings += version_warnings(version, tables.schema)
    own.update({k: v for k, v in (meta or {}).items() if v is not None and k != "profile_schema_version"})
    if version:
        own["profile_schema_version"] = str(version)
    sysmeta = one_row(tables, "SystemProfileMetadata", ("first_ts_ns", "last_ts_ns", "ntff_version",
                                                        "hbm_capacity_bytes")) or {}
    if sysmeta.get("ntff_version") is not None:
        own["ntff_version"] = sysmeta["ntff_version"]
    cap = sysmeta.get("hbm_capacity_bytes")
    if isinstance(cap, int) and cap > 0:
        b.metadata["device_memory_bytes"] = cap  # the memory_probe key the memory_peak finding reads
    execs = add_system_events(b, tables, warnings, host_row)
    own["events"] = execs.counts
    if link is not None and execs.unlinked is not None:
        link(list(zip(*(a.tolist() for a in execs.unlinked))))
    own["hbm_peak_bytes"] = add_hbm_bytes(b, tables)
    own["host_peaks"] = add_host_usage(b, tables)
    own.update(add_device_profiles(b, tables, meta or {}, execs, warnings,
                                   host_clock=bool(execs.counts) or before[0] > 0))
    summaries = summaries_in(folder)
    if summaries:  # summary-json beside the tables: kept as written; the Summary table, when read, stays first
        own["summary_json"] = summaries
        per = [m for f in summaries.values() for m in f.values()]
        if len(per) == 1 and not own.get("summary"):
            own["summary"] = per[0]
    own[LACKS_KEY] = lacks(system=tables.has("SystemProfileEvents"), device=bool(device_folders(tables)))
    own["tables"] = sorted(set(tables.read))
    own["views_left_out"] = sorted(set(own.get("views_left_out", [])) |
                                   {v for v, ok in tables.views.items() if not ok})
    warnings += tables.warnings
    if (b.n_slices, len(b.c_ts), len(b.i_ts)) == before and not any(
            own.get(k) for k in ("summary", "opcodes", "executions", "instructions", "active_time_ns", "events")):
        if not before[0]:
            raise TraceFormatError(folder, _nothing_usable(tables, own["schema"]["version"]))
        warnings.append(f"{folder}: {_nothing_usable(tables, own['schema']['version'])}")
    b.metadata[EXPLORER_KEY] = {k: v for k, v in own.items() if v not in (None, {}, [])}
    return warnings, _wall(sysmeta)


def lacks(system: bool, device: bool) -> list[str]:
    """The `LACKS_KEY` list of a profile that has (or lacks) a system and a device profile."""
    return [part for part, has in (("system profile", system), ("device profile", device)) if not has]


def _nothing_usable(tables: Tables, version: str) -> str:
    lost = sorted(set(tables.missing))
    if lost:
        return (f"Neuron Explorer profile (schema {version}) has nothing neuron-prof can show: "
                f"{', '.join(lost[:8])}{', ...' if len(lost) > 8 else ''} missing")
    return (f"Neuron Explorer profile (schema {version}) has nothing neuron-prof can show: no rows in "
            f"{', '.join(sorted(tables.parts)) or 'any table'}")


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
    below = [d for d in below if d.parent not in below]  # a profile's device-profile subfolders are its own
    if len(below) == 1:
        return below[0]
    if below:
        names = ", ".join(str(d.relative_to(folder)) for d in below[:4]) + (", ..." if len(below) > 4 else "")
        raise TraceLoadError(folder, f"holds {len(below)} processed Neuron Explorer profiles ({names}): "
                                     "name one of them")
    raw = [d for d in [folder, *sorted(folder.glob("*/")), *sorted(folder.glob("*/*/"))]
           if d.is_dir() and any(next(d.glob(g), None) is not None for g in RAW_CAPTURE)]
    if raw:
        run = next((d.parent for d in (raw[0], raw[0].parent) if "_pid_" in d.name), raw[0])  # the docs: RUN_DIR
        raise TraceLoadError(folder, f"is a Neuron runtime capture not yet processed: run `neuron-explorer view -d "
                                     f"{run} --output-format parquet --output-file {run}/parquet` and load "
                                     f"{folder} again")
    raise TraceLoadError(folder, "is a directory, not a trace file nor a Neuron Explorer profile "
                                 "(no Metadata.parquet, SystemProfileEvents_0.parquet... in it or below it)")


def _warnings(tables: Tables) -> list[str]:
    """``Warning`` rows first (they say data was lost), as "Neuron Explorer [category]: message"."""
    import pyarrow as pa

    if not tables.need("Explorer's own warnings", "Warning", ("message",)):
        return []
    t = tables.table("Warning", {"message": pa.string(), "category": pa.string()})
    if t is None:
        return []
    out = []
    for msg, cat in zip(t.column("message").to_pylist(), t.column("category").to_pylist()):
        out.append(f"Neuron Explorer{f' [{cat}]' if cat else ''}: {msg}")
    return out


def _wall(sysmeta: dict[str, Any]) -> tuple[int, int] | None:
    try:
        a, z = int(str(sysmeta["first_ts_ns"])), int(str(sysmeta["last_ts_ns"]))
    except (KeyError, TypeError, ValueError):
        return None
    return (a, z) if 0 < a <= z else None


def _clock(b: TraceBuilder, wall: tuple[int, int] | None) -> str:
    ts = np.asarray(b.s_ts or b.c_ts or ([wall[0]] if wall else [0]), dtype=np.int64)
    return "unix" if len(ts) and int(ts.min()) >= UNIX_NS_MIN else "relative"
