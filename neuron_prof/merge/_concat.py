"""Ranks of a merge: each input made a rank (`rank_trace`), and ranks concatenated into one Trace."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from neuron_prof.model import (
    ArgsStore,
    CounterTable,
    FlowTable,
    InstantTable,
    Meta,
    Process,
    SliceTable,
    StringTable,
    Trace,
    Track,
    drop_mapped,
    windows,
)
from neuron_prof.model.reserve import mapped_zeros

PID_STRIDE = 10_000_000
"""Merged pid = rank * PID_STRIDE + original pid (Linux pids stay below 2**22)."""
FLOW_RANK_SHIFT = 48
"""Merged flow id = (rank << 48) | original id, unique across ranks."""


def _merged_pid(rank: int, pid: int | str, index: int) -> int:
    if isinstance(pid, int) and 0 <= pid < PID_STRIDE - 100_000:
        return rank * PID_STRIDE + pid
    return rank * PID_STRIDE + PID_STRIDE - 100_000 + index


def rank_trace(trace: Trace, rank: int, shift_ns: int) -> Trace:
    """`trace` as rank `rank` of a merge: processes named "rank R: ...", pids namespaced, flow ids made unique
    across ranks, clock shifted (timestamps, the wall range, step bounds and run-queue sample times in the
    metadata), metadata rank set.

    Columns other than timestamps and flow ids are shared with `trace`, not copied; timestamps too when the shift
    is 0. A trace from the column cache gets its new columns in mapped files beside its own (`_derived`), written
    a window at a time: the merge does not hold a whole-trace column, and the analyses see a cached trace."""
    procs = tuple(dataclasses.replace(
        p, pid=_merged_pid(rank, p.pid, i), rank=rank, sort_index=rank * 1000 + (p.sort_index or 0) % 1000,
        name=p.name if p.name.startswith(f"rank {rank}") else f"rank {rank}: {p.name}")
        for i, p in enumerate(trace.processes))
    s, ins, c, f = trace.slices, trace.instants, trace.counters, trace.flows
    md = dict(trace.metadata)
    md[Meta.RANK] = rank
    wall = md.get(Meta.WALL)
    if isinstance(wall, (list, tuple)) and len(wall) == 2:
        md[Meta.WALL] = [int(wall[0]) + shift_ns, int(wall[1]) + shift_ns]
    if isinstance(md.get(Meta.STEPS), list):
        md[Meta.STEPS] = shift_steps(md[Meta.STEPS], shift_ns)
    if isinstance(md.get(Meta.RUNQUEUE), list):  # [ts_ns, on_cpu_ns, wait_ns]: the time moves, the counters stay
        md[Meta.RUNQUEUE] = [[int(r[0]) + shift_ns, *r[1:]] if isinstance(r, (list, tuple)) and r else r
                             for r in md[Meta.RUNQUEUE]]
    return trace.replace(
        processes=procs, metadata=md, findings=(),
        slices=SliceTable(_shifted(s.ts_ns, shift_ns), s.dur_ns, s.track, s.name, s.cat, s.args),
        instants=InstantTable(_shifted(ins.ts_ns, shift_ns), ins.track, ins.name, ins.cat, ins.args),
        counters=CounterTable(_shifted(c.ts_ns, shift_ns), c.track, c.value),
        flows=FlowTable(f.src, f.dst, _derived(f.flow_id, lambda x: (np.int64(rank) << FLOW_RANK_SHIFT)
                                               | (x & ((1 << FLOW_RANK_SHIFT) - 1))), f.cat, f.name))


def _shifted(ts: np.ndarray, shift_ns: int) -> np.ndarray:
    """Timestamps moved by `shift_ns` (the column itself when the shift is 0 and it is a read-only mapped one)."""
    if not shift_ns and isinstance(ts, np.memmap) and not ts.flags.writeable:
        return ts
    return _derived(ts, lambda x: x + shift_ns)


def _derived(col: np.ndarray, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """`fn(col)` (same length and type). For a column of the column cache: written `ROW_WINDOW` items at a time to an
    unlinked file beside it, mapped read-only, its pages and the column's let go after each window; in memory for
    any other column (or when that folder cannot be written)."""
    name = getattr(col, "filename", None)
    if not isinstance(col, np.memmap) or not name or not len(col):
        return fn(col)
    try:
        fd, tmp = tempfile.mkstemp(dir=Path(name).parent, prefix="merge-")
        os.close(fd)
        try:
            out = mapped_zeros(Path(tmp), len(col), col.dtype)  # blocks reserved: a full disk raises here
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # gone when the map goes
    except OSError:  # a read-only cache folder, a full disk
        return fn(col)
    for a in range(0, len(col), windows.ROW_WINDOW):
        z = min(a + windows.ROW_WINDOW, len(col))
        out[a:z] = fn(col[a:z])
        drop_mapped(out)
        drop_mapped(col)
    out.flags.writeable = False
    return out


def shift_steps(steps: list[Any], shift_ns: int) -> list[Any]:
    """Metadata `steps` rows ([step, start_ns, end_ns]) moved by `shift_ns`; other rows kept as they are."""
    return [[row[0], int(row[1]) + shift_ns, int(row[2]) + shift_ns] if isinstance(row, (list, tuple))
            and len(row) == 3 else row for row in steps]


def concat_ranks(traces: list[Trace]) -> Trace:
    """One Trace holding the ranks of a merge (each made by `rank_trace`) one after the other."""
    strings = StringTable()
    processes: list[Process] = []
    tracks: list[Track] = []
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("s_ts", "s_dur", "s_track", "s_name", "s_cat", "s_args",
                                                          "i_ts", "i_track", "i_name", "i_cat", "i_args",
                                                          "c_ts", "c_track", "c_val",
                                                          "f_src", "f_dst", "f_id", "f_cat", "f_name")}
    args_store, arg_bases = ArgsStore.concat([t.args for t in traces])
    slice_base = 0
    for t, arg_base in zip(traces, arg_bases):
        smap = np.array([strings.intern(s) for s in t.strings.as_list()], dtype=np.int32)
        proc_base, track_base = len(processes), len(tracks)
        processes += t.processes
        for tr in t.tracks:
            tracks.append(dataclasses.replace(tr, process=tr.process + proc_base))
        s, ins, c, f = t.slices, t.instants, t.counters, t.flows
        cols["s_ts"].append(s.ts_ns)
        cols["s_dur"].append(s.dur_ns)
        cols["s_track"].append(s.track + track_base)
        cols["s_name"].append(smap[s.name])
        cols["s_cat"].append(smap[s.cat])
        cols["s_args"].append(np.where(s.args >= 0, s.args + arg_base, -1))
        cols["i_ts"].append(ins.ts_ns)
        cols["i_track"].append(ins.track + track_base)
        cols["i_name"].append(smap[ins.name])
        cols["i_cat"].append(smap[ins.cat])
        cols["i_args"].append(np.where(ins.args >= 0, ins.args + arg_base, -1))
        cols["c_ts"].append(c.ts_ns)
        cols["c_track"].append(c.track + track_base)
        cols["c_val"].append(c.value)
        cols["f_src"].append(f.src + slice_base)
        cols["f_dst"].append(f.dst + slice_base)
        cols["f_id"].append(f.flow_id)
        cols["f_cat"].append(smap[f.cat])
        cols["f_name"].append(smap[f.name])
        slice_base += len(s)

    def cat(k: str, dt: type) -> np.ndarray:
        return np.concatenate(cols[k]).astype(dt) if cols[k] else np.zeros(0, dtype=dt)

    merged = Trace(
        strings=strings, processes=tuple(processes), tracks=tuple(tracks),
        slices=SliceTable(cat("s_ts", np.int64), cat("s_dur", np.int64), cat("s_track", np.int32),
                          cat("s_name", np.int32), cat("s_cat", np.int32), cat("s_args", np.int64)),
        instants=InstantTable(cat("i_ts", np.int64), cat("i_track", np.int32), cat("i_name", np.int32),
                              cat("i_cat", np.int32), cat("i_args", np.int64)),
        counters=CounterTable(cat("c_ts", np.int64), cat("c_track", np.int32), cat("c_val", np.float64)),
        flows=FlowTable(cat("f_src", np.int64), cat("f_dst", np.int64), cat("f_id", np.int64),
                        cat("f_cat", np.int32), cat("f_name", np.int32)),
        args=args_store,
    )
    return merged


def add_flows(trace: Trace, src: np.ndarray, dst: np.ndarray, first_id: int, cat: str, name: str) -> Trace:
    """A new Trace with flows src[i] -> dst[i] appended (ids first_id, first_id+1, ...)."""
    if not len(src):
        return trace
    cid, nid = trace.strings.intern(cat), trace.strings.intern(name)
    f = trace.flows
    n = len(src)
    flows = FlowTable(np.concatenate([f.src, src]), np.concatenate([f.dst, dst]),
                      np.concatenate([f.flow_id, first_id + np.arange(n, dtype=np.int64)]),
                      np.concatenate([f.cat, np.full(n, cid, dtype=np.int32)]),
                      np.concatenate([f.name, np.full(n, nid, dtype=np.int32)]))
    return trace.replace(flows=flows)
