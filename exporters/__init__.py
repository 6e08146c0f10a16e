"""Exporters: the model (and its findings) out to Chrome/Kineto JSON, Perfetto .pftrace, HTML and text.

`write_trace(trace, path)` picks the format from the file name (`.json`, `.json.gz` -> Chrome JSON;
`.pftrace`, `.perfetto-trace`, `.pb` -> native Perfetto); `fmt` overrides it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from neuron_prof.errors import UsageError

if TYPE_CHECKING:
    from neuron_prof.model import Trace

JSON_SUFFIXES = (".json", ".json.gz")
PFTRACE_SUFFIXES = (".pftrace", ".perfetto-trace", ".pb")


def format_for(path: str | Path) -> str:
    """"chrome_json" or "pftrace" from a file name; raises UsageError for anything else."""
    name = str(path).lower()
    if name.endswith(JSON_SUFFIXES):
        return "chrome_json"
    if name.endswith(PFTRACE_SUFFIXES):
        return "pftrace"
    raise UsageError(f"{path}: cannot tell the trace format from the name (use .json, .json.gz or .pftrace)")


def write_trace(trace: Trace, path: str | Path, fmt: str | None = None) -> Path:
    """Write `trace` to `path` in the format its name implies (or `fmt`). Returns the path."""
    fmt = fmt or format_for(path)
    path = Path(path)
    if fmt == "chrome_json":
        from neuron_prof.exporters.chrome_json import write_chrome_json

        write_chrome_json(trace, path)
    elif fmt == "pftrace":
        from neuron_prof.exporters.perfetto import write_pftrace

        write_pftrace(trace, path)
    else:
        raise UsageError(f"unknown trace format {fmt!r} (chrome_json or pftrace)")
    return path


def pftrace_path_for(json_path: str | Path) -> Path:
    """The .pftrace written beside a JSON output: same folder and stem (`run/t.json.gz` -> `run/t.pftrace`)."""
    p = Path(json_path)
    name = p.name
    for suf in (".json.gz", ".json"):
        if name.lower().endswith(suf):
            name = name[: -len(suf)]
            break
    return p.with_name(name + ".pftrace")
