"""A trace as the column cache gives it back: its columns written to a folder and read back memory-mapped (the
path a big trace takes), for tests of passes that read such a trace a window at a time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neuron_prof.loaders.coldir import read_trace, write_trace
from neuron_prof.model import Trace


def mapped_copy(trace: Trace, folder: Path) -> Trace:
    """`trace` written to the new folder `folder` and read back from it (mapped columns and args blob)."""
    folder.mkdir()
    write_trace(folder, trace, "k")
    mapped = read_trace(folder)
    assert isinstance(mapped.slices.ts_ns, np.memmap)
    return mapped
