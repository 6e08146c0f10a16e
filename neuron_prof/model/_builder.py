"""TraceBuilder: the one way to make a Trace. Appends go to Python lists; build() makes columns."""

from __future__ import annotations

from typing import Any

import numpy as np

from neuron_prof.model._args import ArgsBuilder
from neuron_prof.model._strings import StringTable
from neuron_prof.model._tables import CounterTable, FlowTable, InstantTable, SliceTable
from neuron_prof.model._trace import Process, Trace, Track
from neuron_prof.model.schema import ProcessKind, TrackKind


class TraceBuilder:
    """Collects processes, tracks and events, then builds an immutable Trace.

    Example:
        b = TraceBuilder()
        t = b.thread_track(pid=1, tid=1, thread_name="main")
        s = b.add_slice(t, ts_ns=1_000, dur_ns=500, name="aten::mm", cat="cpu_op", args={"Input Dims": [[2, 2]]})
        trace = b.build()
    """

    def __init__(self, strings: StringTable | None = None) -> None:
        self.strings = strings if strings is not None else StringTable()
        self.processes: list[Process] = []
        self.tracks: list[Track] = []
        self.metadata: dict[str, Any] = {}
        self.findings: list[dict[str, Any]] = []
        self.args = ArgsBuilder()
        self._pid_index: dict[int | str, int] = {}
        self._track_index: dict[tuple[int, str, str, int | str | None], int] = {}
        self._thread_index: dict[tuple[int, int | str], int] = {}
        # slices
        self.s_ts: list[int] = []
        self.s_dur: list[int] = []
        self.s_track: list[int] = []
        self.s_name: list[int] = []
        self.s_cat: list[int] = []
        self.s_args: list[int] = []
        # instants
        self.i_ts: list[int] = []
        self.i_track: list[int] = []
        self.i_name: list[int] = []
        self.i_cat: list[int] = []
        self.i_args: list[int] = []
        # counters
        self.c_ts: list[int] = []
        self.c_track: list[int] = []
        self.c_value: list[float] = []
        # flows
        self.f_src: list[int] = []
        self.f_dst: list[int] = []
        self.f_id: list[int] = []
        self.f_cat: list[int] = []
        self.f_name: list[int] = []

    # ---- processes and tracks --------------------------------------------------------------
    def process(self, pid: int | str, name: str | None = None, kind: str = ProcessKind.HOST,
                rank: int | None = None, sort_index: int | None = None, labels: str | None = None) -> int:
        """Index of the process with this pid, created on first use; later calls may fill in names."""
        i = self._pid_index.get(pid)
        if i is None:
            i = len(self.processes)
            self._pid_index[pid] = i
            self.processes.append(Process(pid=pid, name=name or f"process {pid}", kind=kind, rank=rank,
                                          sort_index=sort_index, labels=labels or ""))
            return i
        p = self.processes[i]
        if name is not None or sort_index is not None or labels is not None or rank is not None:
            self.processes[i] = Process(pid=pid, name=name if name is not None else p.name,
                                        kind=kind if kind != ProcessKind.HOST else p.kind,
                                        rank=rank if rank is not None else p.rank,
                                        sort_index=sort_index if sort_index is not None else p.sort_index,
                                        labels=labels if labels is not None else p.labels)
        return i

    def thread_track(self, pid: int | str, tid: int | str, thread_name: str | None = None,
                     kind: str = TrackKind.THREAD, sort_index: int | None = None) -> int:
        """Index of the track for thread (pid, tid), created on first use."""
        p = self.process(pid)
        key = (p, tid)
        i = self._thread_index.get(key)
        if i is None:
            i = len(self.tracks)
            self._thread_index[key] = i
            self.tracks.append(Track(process=p, name=thread_name or f"thread {tid}", kind=kind, tid=tid,
                                     sort_index=sort_index))
            return i
        if thread_name is not None or sort_index is not None or kind != TrackKind.THREAD:
            t = self.tracks[i]
            self.tracks[i] = Track(process=p, name=thread_name or t.name,
                                   kind=kind if kind != TrackKind.THREAD else t.kind, tid=tid,
                                   sort_index=sort_index if sort_index is not None else t.sort_index,
                                   unit=t.unit)
        return i

    def track(self, process: int, name: str, kind: str, tid: int | str | None = None, unit: str = "",
              sort_index: int | None = None) -> int:
        """Index of a named track of `kind` in `process` (created on first use)."""
        if tid is not None:
            return self.thread_track(self.processes[process].pid, tid, name, kind=kind, sort_index=sort_index)
        key = (process, kind, name, tid)
        i = self._track_index.get(key)
        if i is None:
            i = len(self.tracks)
            self._track_index[key] = i
            self.tracks.append(Track(process=process, name=name, kind=kind, tid=tid, unit=unit,
                                     sort_index=sort_index))
        return i

    def set_track(self, i: int, **changes: Any) -> None:
        """Change fields of an existing track (e.g. its kind once a loader learns it)."""
        import dataclasses

        self.tracks[i] = dataclasses.replace(self.tracks[i], **changes)

    # ---- events ------------------------------------------------------------------------------
    def add_slice(self, track: int, ts_ns: int, dur_ns: int, name: str, cat: str = "",
                  args: dict[str, Any] | None = None) -> int:
        """Append a slice; returns its row index."""
        intern = self.strings.intern
        return self.add_slice_ids(track, ts_ns, dur_ns, intern(name), intern(cat), self.args.add(args))

    def add_slice_ids(self, track: int, ts_ns: int, dur_ns: int, name_id: int, cat_id: int, args_idx: int) -> int:
        """Fast path: append a slice from interned ids and an args index."""
        self.s_ts.append(ts_ns)
        self.s_dur.append(dur_ns)
        self.s_track.append(track)
        self.s_name.append(name_id)
        self.s_cat.append(cat_id)
        self.s_args.append(args_idx)
        return len(self.s_ts) - 1

    def add_instant(self, track: int, ts_ns: int, name: str, cat: str = "",
                    args: dict[str, Any] | None = None) -> int:
        intern = self.strings.intern
        return self.add_instant_ids(track, ts_ns, intern(name), intern(cat), self.args.add(args))

    def add_instant_ids(self, track: int, ts_ns: int, name_id: int, cat_id: int, args_idx: int) -> int:
        self.i_ts.append(ts_ns)
        self.i_track.append(track)
        self.i_name.append(name_id)
        self.i_cat.append(cat_id)
        self.i_args.append(args_idx)
        return len(self.i_ts) - 1

    def add_counter(self, track: int, ts_ns: int, value: float) -> int:
        self.c_ts.append(ts_ns)
        self.c_track.append(track)
        self.c_value.append(value)
        return len(self.c_ts) - 1

    def add_flow(self, src_slice: int, dst_slice: int, flow_id: int | None = None, cat: str = "",
                 name: str = "") -> int:
        """Link two slices by row index. Ids default to a running number."""
        if flow_id is None:
            flow_id = len(self.f_src) + 1
        self.f_src.append(src_slice)
        self.f_dst.append(dst_slice)
        self.f_id.append(flow_id)
        self.f_cat.append(self.strings.intern(cat))
        self.f_name.append(self.strings.intern(name))
        return len(self.f_src) - 1

    @property
    def n_slices(self) -> int:
        return len(self.s_ts)

    # ---- build ---------------------------------------------------------------------------------
    def build(self) -> Trace:
        """The finished, immutable Trace."""
        a = np.asarray
        slices = SliceTable(ts_ns=a(self.s_ts, dtype=np.int64), dur_ns=a(self.s_dur, dtype=np.int64),
                            track=a(self.s_track, dtype=np.int32), name=a(self.s_name, dtype=np.int32),
                            cat=a(self.s_cat, dtype=np.int32), args=a(self.s_args, dtype=np.int64))
        instants = InstantTable(ts_ns=a(self.i_ts, dtype=np.int64), track=a(self.i_track, dtype=np.int32),
                                name=a(self.i_name, dtype=np.int32), cat=a(self.i_cat, dtype=np.int32),
                                args=a(self.i_args, dtype=np.int64))
        counters = CounterTable(ts_ns=a(self.c_ts, dtype=np.int64), track=a(self.c_track, dtype=np.int32),
                                value=a(self.c_value, dtype=np.float64))
        flows = FlowTable(src=a(self.f_src, dtype=np.int64), dst=a(self.f_dst, dtype=np.int64),
                          flow_id=a(self.f_id, dtype=np.int64), cat=a(self.f_cat, dtype=np.int32),
                          name=a(self.f_name, dtype=np.int32))
        return Trace(strings=self.strings, processes=tuple(self.processes), tracks=tuple(self.tracks),
                     slices=slices, instants=instants, counters=counters, flows=flows, args=self.args.build(),
                     metadata=dict(self.metadata), findings=tuple(self.findings))
