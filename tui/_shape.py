"""What the views' table builders share (pure numpy, no Textual): the table type, object columns, an
argument as text, most-first order, and the step times (the overview and the rank table).

Each view's own table is built next to its screen (`screens/<view>.py`, or `screens/_<view>_table.py` for a
long one). Diagnoses (findings, their cost ranking and advice) and op accounting come from
`neuron_prof.analysis`.

A table is a plain ``dict[str, np.ndarray]`` of equal-length columns; string columns are object arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from neuron_prof.analysis import find_steps
from neuron_prof.model import Trace

Table = dict[str, np.ndarray]


def step_times(trace: Trace) -> np.ndarray:
    """Duration of each training step in ns (steps as the analysis finds them), in time order."""
    _, start, end = find_steps(trace)
    dur: np.ndarray = (end - start).astype(np.int64)
    return dur


def objects(values: Sequence[Any]) -> np.ndarray:
    """`values` as a 1-d object column (lists stay elements, not a second axis)."""
    a = np.empty(len(values), dtype=object)
    a[:] = list(values)
    return a


def arg_text(v: Any) -> str:
    """A slice argument as one string: "" for none, a list one element per line."""
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple)):
        return "\n".join(arg_text(x) for x in v)
    return str(v)


def most_first(table: Table, key: str) -> Table:
    """`table`'s rows by column `key`, largest first (ties keep their order)."""
    o = np.argsort(-table[key], kind="stable")
    return {k: v[o] for k, v in table.items()}
