"""Exporters: the model (and its findings) out to Chrome/Kineto JSON, Perfetto .pftrace, HTML and text.

`write_trace(trace, path)` picks the format from the file name by the rule of `neuron_prof.formats` (JSON,
gzipped when the name says so, or native Perfetto); `fmt` (a format id) overrides it. The file-name rules
(`format_for`, `JSON_SUFFIXES`, `PFTRACE_SUFFIXES`, `pftrace_path_for`) are the registry's, re-exported.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuron_prof.errors import UsageError
from neuron_prof.formats import FORMATS, JSON_SUFFIXES, PFTRACE_SUFFIXES, format_for
from neuron_prof.formats import companion_pftrace as pftrace_path_for

if TYPE_CHECKING:
    from neuron_prof.model import Trace

__all__ = ["JSON_SUFFIXES", "PFTRACE_SUFFIXES", "format_for", "pftrace_path_for", "write_trace", "writer_for"]


def writer_for(fmt: str) -> Callable[..., Any]:
    """The exporter function that writes format `fmt` (an id of `neuron_prof.formats.FORMATS`), imported on
    first use; raises UsageError for a format neuron-prof does not write."""
    f = FORMATS.get(fmt)
    if f is None or f.writer is None:
        ids = " or ".join(k for k, v in FORMATS.items() if v.writer)
        raise UsageError(f"unknown trace format {fmt!r} ({ids})")
    module, _, name = f.writer.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return fn


def write_trace(trace: Trace, path: str | Path, fmt: str | None = None) -> Path:
    """Write `trace` to `path` in the format its name implies (or `fmt`). Returns the path."""
    path = Path(path)
    writer_for(fmt or format_for(path))(trace, path)
    return path
