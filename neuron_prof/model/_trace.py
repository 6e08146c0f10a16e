"""The Trace: processes, tracks and columnar event tables on one clock (Unix ns)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from neuron_prof.model._args import ArgsStore, drop_mapped
from neuron_prof.model._strings import StringTable
from neuron_prof.model._tables import CounterTable, FlowTable, InstantTable, SliceTable
from neuron_prof.model.schema import TrackKind
from neuron_prof.model.windows import row_windows


@dataclass(frozen=True)
class Process:
    """A process group of tracks: a host process (one rank) or a device."""

    pid: int | str
    """The pid as the source wrote it (Kineto uses ints, and strings such as "Spans")."""
    name: str
    kind: str = "host"
    rank: int | None = None
    sort_index: int | None = None
    labels: str = ""


@dataclass(frozen=True)
class Track:
    """One timeline row: a thread, a device queue, a probe track or a counter."""

    process: int
    """Index into Trace.processes."""
    name: str
    kind: str = TrackKind.THREAD
    tid: int | str | None = None
    """Thread id as the source wrote it (None for tracks that are not threads)."""
    sort_index: int | None = None
    unit: str = ""
    """Counter tracks: "bytes" or free text."""

    @property
    def is_counter(self) -> bool:
        return self.kind in TrackKind.COUNTERS


@dataclass(frozen=True, eq=False)
class Trace:
    """An immutable trace. Build one with TraceBuilder or a loader; derive new ones with `replace`."""

    strings: StringTable
    processes: tuple[Process, ...]
    tracks: tuple[Track, ...]
    slices: SliceTable
    instants: InstantTable
    counters: CounterTable
    flows: FlowTable
    args: ArgsStore
    metadata: dict[str, Any] = field(default_factory=dict)
    findings: tuple[dict[str, Any], ...] = ()
    """Findings as plain dicts (see neuron_prof.analysis.Finding.to_dict); empty until analysed."""

    # ---- size -----------------------------------------------------------------------------
    @property
    def n_events(self) -> int:
        """Slices + instants + counter samples (flows are links, not events)."""
        return len(self.slices) + len(self.instants) + len(self.counters)

    # ---- lookups --------------------------------------------------------------------------
    def s(self, string_id: int) -> str:
        """The string for an interned id."""
        return self.strings[string_id]

    def slice_name(self, i: int) -> str:
        return self.strings[int(self.slices.name[i])]

    def slice_args(self, i: int) -> dict[str, Any]:
        return self.args.get(int(self.slices.args[i]))

    def instant_args(self, i: int) -> dict[str, Any]:
        return self.args.get(int(self.instants.args[i]))

    def track_ids(self, *kinds: str) -> np.ndarray:
        """Indices of the tracks of the given kinds (all tracks when none given)."""
        return np.array([i for i, t in enumerate(self.tracks) if not kinds or t.kind in kinds], dtype=np.int32)

    def slices_on(self, *kinds: str) -> np.ndarray:
        """Row indices of the slices on tracks of these kinds, in table order."""
        ids, track = self.track_ids(*kinds), self.slices.track
        return np.concatenate([np.flatnonzero(np.isin(track[a:z], ids)) + a  # a window at a time, pages handed back
                               for a, z in row_windows(self, len(track))] or [np.zeros(0, np.int64)])

    def instants_on(self, *kinds: str) -> np.ndarray:
        return np.flatnonzero(np.isin(self.instants.track, self.track_ids(*kinds)))

    def find_track(self, kind: str, name: str | None = None) -> int | None:
        """First track of `kind` (and `name`, when given), or None."""
        for i, t in enumerate(self.tracks):
            if t.kind == kind and (name is None or t.name == name):
                return i
        return None

    def name_ids(self, *names: str) -> np.ndarray:
        """String ids of the names that exist in this trace (unknown names are skipped)."""
        ids = [self.strings.get(n) for n in names]
        return np.array([i for i in ids if i is not None], dtype=np.int32)

    def time_range(self) -> tuple[int, int]:
        """(first start, last end) over all events; (0, 0) for an empty trace."""
        starts, ends = [], []
        sl = self.slices
        if len(sl):
            starts.append(int(sl.ts_ns.min()))
            ends.append(max(int((sl.ts_ns[a:z] + sl.dur_ns[a:z]).max())
                            for a, z in row_windows(self, len(sl))))  # no end column over every slice
        for tab in (self.instants, self.counters):
            if len(tab):
                starts.append(int(tab.ts_ns.min()))
                ends.append(int(tab.ts_ns.max()))
        self.drop_pages()  # a pass over every event: its pages need not stay resident
        if not starts:
            return (0, 0)
        return (min(starts), max(ends))

    @property
    def wall_ns(self) -> int:
        """Profiled wall time: the recorded region when known, else the span of all events."""
        w = self.metadata.get("wall_ns")
        if isinstance(w, (list, tuple)) and len(w) == 2 and w[1] > w[0]:
            return int(w[1] - w[0])
        a, b = self.time_range()
        return b - a

    @property
    def rank(self) -> int | None:
        r = self.metadata.get("rank")
        return int(r) if isinstance(r, int) else None

    def drop_pages(self) -> None:
        """Hand the pages read so far of memory-mapped columns and args (a trace opened from the column cache)
        back to the kernel: they stay in the page cache and come back on the next read, but a pass over every
        row no longer keeps the whole cache in this process's resident memory. Nothing for columns in memory."""
        for tab in (self.slices, self.instants, self.counters, self.flows):
            for f in dataclasses.fields(tab):
                drop_mapped(getattr(tab, f.name))
        self.args.drop_pages()

    def replace(self, **changes: Any) -> Trace:
        """A new Trace with some fields replaced (columns are shared, never copied)."""
        return dataclasses.replace(self, **changes)

    def __repr__(self) -> str:
        return (f"Trace({len(self.processes)} processes, {len(self.tracks)} tracks, {len(self.slices)} slices, "
                f"{len(self.instants)} instants, {len(self.counters)} counter samples, {len(self.flows)} flows, "
                f"{len(self.findings)} findings)")
