"""Columnar event tables. Each column is a read-only numpy array; row i of every column is one event."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np


def _freeze(*arrays: np.ndarray) -> None:
    for a in arrays:
        a.flags.writeable = False


@dataclass(frozen=True, eq=False)
class SliceTable:
    """Spans with a duration. ``args`` indexes the trace's ArgsStore (-1: none)."""

    ts_ns: np.ndarray  # int64, Unix ns
    dur_ns: np.ndarray  # int64
    track: np.ndarray  # int32, index into Trace.tracks
    name: np.ndarray  # int32, string id
    cat: np.ndarray  # int32, string id
    args: np.ndarray  # int64, ArgsStore index or -1

    DTYPES = {"ts_ns": np.int64, "dur_ns": np.int64, "track": np.int32, "name": np.int32,
              "cat": np.int32, "args": np.int64}

    def __post_init__(self) -> None:
        _check(self)

    def __len__(self) -> int:
        return len(self.ts_ns)

    @property
    def end_ns(self) -> np.ndarray:
        return self.ts_ns + self.dur_ns

    def end_at(self, idx: np.ndarray) -> np.ndarray:
        """``end_ns[idx]`` without the whole column's end computed first (a big trace's every slice)."""
        return self.ts_ns[idx] + self.dur_ns[idx]

    def take(self, idx: np.ndarray) -> SliceTable:
        """A new table holding rows `idx` (in that order)."""
        return SliceTable(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})


@dataclass(frozen=True, eq=False)
class InstantTable:
    """Zero-duration events (Kineto ``i``/``I``, memory events, findings markers)."""

    ts_ns: np.ndarray
    track: np.ndarray
    name: np.ndarray
    cat: np.ndarray
    args: np.ndarray

    DTYPES = {"ts_ns": np.int64, "track": np.int32, "name": np.int32, "cat": np.int32, "args": np.int64}

    def __post_init__(self) -> None:
        _check(self)

    def __len__(self) -> int:
        return len(self.ts_ns)

    def take(self, idx: np.ndarray) -> InstantTable:
        return InstantTable(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})


@dataclass(frozen=True, eq=False)
class CounterTable:
    """Counter samples; each counter track is one series."""

    ts_ns: np.ndarray
    track: np.ndarray
    value: np.ndarray  # float64

    DTYPES = {"ts_ns": np.int64, "track": np.int32, "value": np.float64}

    def __post_init__(self) -> None:
        _check(self)

    def __len__(self) -> int:
        return len(self.ts_ns)

    def take(self, idx: np.ndarray) -> CounterTable:
        return CounterTable(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})


@dataclass(frozen=True, eq=False)
class FlowTable:
    """Arrows between two slices (indices into the SliceTable)."""

    src: np.ndarray  # int64 slice index
    dst: np.ndarray  # int64 slice index
    flow_id: np.ndarray  # int64, unique within the trace
    cat: np.ndarray  # int32 string id
    name: np.ndarray  # int32 string id

    DTYPES = {"src": np.int64, "dst": np.int64, "flow_id": np.int64, "cat": np.int32, "name": np.int32}

    def __post_init__(self) -> None:
        _check(self)

    def __len__(self) -> int:
        return len(self.src)

    def take(self, idx: np.ndarray) -> FlowTable:
        return FlowTable(**{f.name: getattr(self, f.name)[idx] for f in fields(self)})


def _check(table: object) -> None:
    dtypes: dict[str, type] = table.DTYPES  # type: ignore[attr-defined]
    n = None
    for name, dt in dtypes.items():
        a = getattr(table, name)
        if not isinstance(a, np.ndarray) or a.dtype != dt or a.ndim != 1:
            object.__setattr__(table, name, a := np.ascontiguousarray(a, dtype=dt).reshape(-1))
        if n is None:
            n = len(a)
        elif len(a) != n:
            raise ValueError(f"{type(table).__name__}: column {name} has {len(a)} rows, expected {n}")
        _freeze(a)


def empty_table(cls: type[SliceTable | InstantTable | CounterTable | FlowTable]) -> object:
    """An empty table of class `cls`."""
    return cls(**{k: np.zeros(0, dtype=v) for k, v in cls.DTYPES.items()})
