"""Neuron Explorer profiles: a processed profile folder of Parquet tables (`reader`, with `_schema`, `_tables`,
`_events`, `_device`, `_counters`, `_instructions`, `_summary`, `_profiles`, `_clock`), a runtime output folder
with its torch.profiler trace (`capture`, `copies`), the framework mapping (`framework_mapping`), the
Perfetto output (`perfetto`), the summary-json (`summary_json`) and the legacy JSON export (`legacy_json`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from neuron_prof.model import Trace

__all__ = ["load_dir"]


def load_dir(folder: Path) -> Trace:
    """A Neuron Explorer folder: without Parquet tables, its Perfetto output when it holds one, else the legacy
    JSON export when it holds one; else the processed tables (with the capture's torch.profiler trace when
    there is one). Raises TraceLoadError saying what it expected when the folder holds none."""
    from neuron_prof.loaders.explorer.legacy_json import LEGACY_FILE, load_explorer_json
    from neuron_prof.loaders.explorer.perfetto import explorer_files, load_explorer_pftrace

    if next(folder.glob("*.parquet"), None) is None:
        if any(explorer_files(folder)):
            return load_explorer_pftrace(folder)
        if (folder / LEGACY_FILE).is_file():
            return load_explorer_json(folder)
    from neuron_prof.loaders.explorer.capture import load_folder

    return load_folder(folder)
